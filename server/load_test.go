package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// loadResult is what a load run measured.
type loadResult struct {
	requests, errors, overLimit int64
	elapsed                     time.Duration
	p50, p90, p99, max          time.Duration
	firstErr                    error
	latencies                   []time.Duration // every request's, sorted
}

// slowerThan counts the requests that took longer than d.
func (r loadResult) slowerThan(d time.Duration) int {
	i, _ := slices.BinarySearch(r.latencies, d+1)
	return len(r.latencies) - i
}

func (r loadResult) String() string {
	return fmt.Sprintf("%d requests in %v (%.0f/s), %d errors, %d over limit; latency p50 %v p90 %v p99 %v max %v",
		r.requests, r.elapsed.Round(time.Millisecond), float64(r.requests)/r.elapsed.Seconds(), r.errors, r.overLimit,
		r.p50, r.p90, r.p99, r.max)
}

// load runs `clients` gRPC clients, each on its own connection, calling ShouldRateLimit in a
// closed loop for d (bounded) against addr. Keys cycle over `keys` client addresses, so most
// requests are allowed and some hit their limit.
//
// When domain is "grpc.health.v1" the clients call the gRPC health service's Check
// instead: an empty handler on the same server and connections, the floor of what any
// unary gRPC call costs there.
func load(t *testing.T, addr, domain string, clients int, d time.Duration, keys int) loadResult {
	t.Helper()
	var mu sync.Mutex
	var all []time.Duration
	var res loadResult
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	begin := time.Now()
	for c := range clients {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		client := rlsv3.NewRateLimitServiceClient(conn)
		health := healthpb.NewHealthClient(conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1<<14)
			var n, errs, over int64
			var first error
			for i := 0; ctx.Err() == nil; i++ {
				req := &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*rlcommon.RateLimitDescriptor{
					desc("remote_address", "10.0."+strconv.Itoa(c)+"."+strconv.Itoa(i%keys)),
				}}
				s := time.Now()
				var resp *rlsv3.RateLimitResponse
				var err error
				if domain == healthDomain {
					_, err = health.Check(context.Background(), &healthpb.HealthCheckRequest{})
					resp = &rlsv3.RateLimitResponse{}
				} else {
					resp, err = client.ShouldRateLimit(context.Background(), req)
				}
				lat = append(lat, time.Since(s))
				n++
				switch {
				case err != nil:
					errs++
					if first == nil {
						first = err
					}
				case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
					over++
				}
			}
			mu.Lock()
			all = append(all, lat...)
			res.requests += n
			res.errors += errs
			res.overLimit += over
			if res.firstErr == nil {
				res.firstErr = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(begin)
	slices.Sort(all)
	res.latencies = all
	if len(all) > 0 {
		q := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
		res.p50, res.p90, res.p99, res.max = q(.5), q(.9), q(.99), all[len(all)-1]
	}
	return res
}

// healthDomain makes load call the health service (see load).
const healthDomain = "grpc.health.v1"

// loadDuration is the bounded length of a load run: 2 s, or SLUICE_LOAD_SECONDS up to 10.
func loadDuration() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("SLUICE_LOAD_SECONDS")); err == nil && s > 0 {
		return time.Duration(min(s, 10)) * time.Second
	}
	return 2 * time.Second
}

const loadRules = `
domain: load
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 50}
`

// TestLoadMemory drives an in-process server on a memory store with 64 concurrent gRPC
// clients: zero errors expected; latency percentiles are reported, never asserted.
func TestLoadMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	srv := startReal(t, loadRules, "memory")
	res := load(t, srv.GRPCAddr(), "load", 64, loadDuration(), 16)
	t.Logf("memory: %v", res)
	if res.errors != 0 || res.requests == 0 {
		t.Fatalf("%d errors (first: %v) in %d requests", res.errors, res.firstErr, res.requests)
	}
}

// TestLoadExternal measures a separately running `sluice serve` (the benchmark in
// docs/BENCHMARKS.md): SLUICE_BENCH_GRPC=host:port and SLUICE_BENCH_HTTP=host:port, whose
// /metrics gives the server's own CPU time. SLUICE_BENCH_DOMAIN (default "load") is the
// domain asked; "grpc.health.v1" measures the gRPC floor instead (see load). Skipped unless
// set.
func TestLoadExternal(t *testing.T) {
	grpcAddr, httpAddr := os.Getenv("SLUICE_BENCH_GRPC"), os.Getenv("SLUICE_BENCH_HTTP")
	if grpcAddr == "" || httpAddr == "" {
		t.Skip("SLUICE_BENCH_GRPC and SLUICE_BENCH_HTTP not set")
	}
	domain := os.Getenv("SLUICE_BENCH_DOMAIN")
	if domain == "" {
		domain = "load"
	}
	// Warm up, then measure.
	load(t, grpcAddr, domain, 64, time.Second, 16)
	cpu0 := processCPU(t, httpAddr)
	res := load(t, grpcAddr, domain, 64, loadDuration(), 16)
	cpu := processCPU(t, httpAddr) - cpu0
	t.Logf("%v", res)
	t.Logf("server CPU: %.3f s for %d requests = %.1f µs/request", cpu, res.requests, cpu/float64(res.requests)*1e6)
	if res.errors != 0 {
		t.Errorf("%d errors, first: %v", res.errors, res.firstErr)
	}
}

// processCPU reads process_cpu_seconds_total from a server's /metrics.
func processCPU(t *testing.T, httpAddr string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatal("no process_cpu_seconds_total")
	return 0
}
