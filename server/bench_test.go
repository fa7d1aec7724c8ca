package server

import (
	"context"
	"net"
	"os"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/redis"
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

// BenchmarkDecide is the server's decision for one request, without the transport: on the
// memory store, and with SLUICE_REDIS_ADDR on Redis, its scripts (redis/) and its counters
// (counters/: WithCounters, the default sliding window decided without Lua), one caller.
func BenchmarkDecide(b *testing.B) {
	benchDecide(b, "", benchServer(b))
	if addr := os.Getenv("SLUICE_REDIS_ADDR"); addr != "" {
		for name, q := range map[string]string{"redis/": "", "counters/": "?counters=true"} {
			st, err := redis.NewFromURL("redis://" + addr + "/0" + q)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			benchDecide(b, name, benchServer(b, func(c *Config) { c.Store = st }))
		}
	}
}

func benchDecide(b *testing.B, prefix string, s *Server) {
	for name, req := range benchRequests() {
		b.Run(prefix+name, func(b *testing.B) {
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
// process: allocations are both sides'). floor/ is the same call to a grpc-go server that
// answers OK with no work (bench/cmd/rlsfloor's): what is above it is the server's own.
func BenchmarkShouldRateLimit(b *testing.B) {
	s := benchServer(b)
	for _, target := range []string{"sluice", "floor"} {
		addr := s.GRPCAddr()
		if target == "floor" {
			addr = floorServer(b)
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		benchCalls(b, target, rlsv3.NewRateLimitServiceClient(conn))
	}
}

// floorOK answers every ShouldRateLimit with OK.
type floorOK struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (floorOK) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

// floorServer serves floorOK with grpc-go's defaults on a loopback port and returns it.
func floorServer(b *testing.B) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, floorOK{})
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// benchCalls runs the bench requests as sub-benchmarks target/NAME.
func benchCalls(b *testing.B, target string, client rlsv3.RateLimitServiceClient) {
	for name, req := range benchRequests() {
		b.Run(target+"/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.ShouldRateLimit(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
