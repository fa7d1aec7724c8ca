package server_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
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

// TestLoadRedis is the 64-client load test on Redis (default store timeout, as served).
func TestLoadRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	testenv.Timing(t) // zero errors needs every call within the store's 250 ms timeout
	url := "redis://" + testenv.RedisAddr(t) + "/0"
	srv := startReal(t, loadRules, url)
	res := load(t, srv.GRPCAddr(), "load", 64, loadDuration(), 16)
	t.Logf("redis: %v", res)
	if res.errors != 0 || res.requests == 0 {
		t.Fatalf("%d errors (first: %v) in %d requests", res.errors, res.firstErr, res.requests)
	}
}
