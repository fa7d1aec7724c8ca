package server

import (
	"context"
	"testing"
)

// BenchmarkShouldRateLimitHandler is the RLS handler's work for one request (ShouldRateLimit:
// the decision, its metrics and the tracing check), without the gRPC transport. With
// tracing off (no TracerProvider) the tracing costs one nil check: compare with the commit
// before tracing (docs/BENCHMARKS.md).
func BenchmarkShouldRateLimitHandler(b *testing.B) {
	svc := rlsService{s: benchServer(b)}
	for name, req := range benchRequests() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := svc.ShouldRateLimit(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
