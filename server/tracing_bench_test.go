package server

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkShouldRateLimitHandler is the RLS handler's work for one request (ShouldRateLimit:
// the decision, its metrics and the tracing check), without the gRPC transport. With
// tracing off (no TracerProvider) the tracing costs one nil check: compare with the commit
// before tracing (docs/BENCHMARKS.md).
func BenchmarkShouldRateLimitHandler(b *testing.B) {
	benchHandler(b, rlsService{s: benchServer(b)})
}

// BenchmarkShouldRateLimitHandlerTraced is BenchmarkShouldRateLimitHandler with tracing on,
// every call sampled and recorded (its spans dropped, not exported): what a recorded trace
// costs a decision.
func BenchmarkShouldRateLimitHandlerTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	benchHandler(b, rlsService{s: benchServer(b, func(c *Config) { c.TracerProvider = tp })})
}

func benchHandler(b *testing.B, svc rlsService) {
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
