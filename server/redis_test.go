package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redis"
)

const sharedRules = `
domain: shared
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 10}
`

// TestTwoInstancesShareOneRedis: two servers on one Redis enforce one global limit.
func TestTwoInstancesShareOneRedis(t *testing.T) {
	url := "redis://" + testenv.RedisAddr(t) + "/0"
	tenant := "t-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + randomSuffix()
	a, b := &harness{}, &harness{}
	a.run(t, redisConfig(t, url))
	b.run(t, redisConfig(t, url))
	allowed := 0
	for i := range 30 {
		h := a
		if i%2 == 1 {
			h = b
		}
		if h.ask(t, "shared", desc("tenant", tenant)).OverallCode.String() == "OK" {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("two instances admitted %d, want the global limit 10", allowed)
	}
}

// TestLoadRedis drives an in-process server on Redis with 64 gRPC clients in a closed loop:
// every request is answered, and none with an error — no connection pool exhausted, no script
// failing, no reply lost or given to another caller with 64 decisions in flight on the store's
// pipelines. What the test controls is that concurrency, not the machine's CPU, so the store
// timeout is the Redis correctness tests' generous one (loadStoreTimeout), not the served
// 250 ms: with the race detector on a busy 2-core machine a call takes longer than that for
// want of CPU alone (p99 370-720 ms at load 4-17, where the test failed 2 runs in 6; issue
// 31), which is no error of the store's. How many requests took longer than the served
// timeout is logged, a figure like the percentiles; the served timeout's latency budget is
// measured by the benchmarks (docs/BENCHMARKS.md, "Service").
func TestLoadRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	url := "redis://" + testenv.RedisAddr(t) + "/0"
	srv := startRealStore(t, loadRules, store.Config{Backend: store.Backend{URL: url, Timeout: loadStoreTimeout}})
	res := load(t, srv.GRPCAddr(), "load", 64, loadDuration(), 16)
	t.Logf("redis: %v; %d took longer than the served store timeout, %v", res, res.slowerThan(redis.DefaultTimeout), redis.DefaultTimeout)
	if res.errors != 0 || res.requests == 0 {
		t.Fatalf("%d errors (first: %v) in %d requests", res.errors, res.firstErr, res.requests)
	}
}

// loadStoreTimeout bounds each store call of TestLoadRedis: long enough that no scheduling
// delay of a loaded machine reaches it, short enough that a hung pipeline fails the test.
const loadStoreTimeout = 5 * time.Second
