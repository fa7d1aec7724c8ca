package server

import (
	"context"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/store/memory"
)

const benchRules = `
domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: path
    rate_limits:
      - {unit: second, requests_per_unit: 1000000000}
      - {unit: hour, requests_per_unit: 1000000000}
`

// benchServer serves benchRules over a memory store on a loopback gRPC port, its Config
// changed by mutate.
func benchServer(b *testing.B, mutate ...func(*Config)) *Server {
	b.Helper()
	doc, err := config.Decode("bench.yaml", []byte(benchRules))
	if err != nil {
		b.Fatal(err)
	}
	rules, err := config.Compile(doc)
	if err != nil {
		b.Fatal(err)
	}
	mem, err := memory.New()
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{Config: rls.Config{Rules: rules, Store: mem, ReloadInterval: -1}, GRPCAddr: "127.0.0.1:0", HTTPAddr: "-"}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Serve(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done; mem.Close() })
	return s
}

func benchRequests() map[string]*rlsv3.RateLimitRequest {
	entry := func(k, v string) *rlcommon.RateLimitDescriptor {
		return &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: k, Value: v}}}
	}
	return map[string]*rlsv3.RateLimitRequest{
		"one":   {Domain: "bench", Descriptors: []*rlcommon.RateLimitDescriptor{entry("remote_address", "10.0.0.1")}},
		"three": {Domain: "bench", Descriptors: []*rlcommon.RateLimitDescriptor{entry("remote_address", "10.0.0.1"), entry("path", "/a"), entry("other", "x")}},
	}
}

// BenchmarkDecide is the server's decision for one request, without the transport.
func BenchmarkDecide(b *testing.B) {
	s := benchServer(b)
	for name, req := range benchRequests() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.decide(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkShouldRateLimit is one RLS call over loopback gRPC (client and server in this
// process: allocations are both sides').
func BenchmarkShouldRateLimit(b *testing.B) {
	s := benchServer(b)
	conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	for name, req := range benchRequests() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.ShouldRateLimit(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
