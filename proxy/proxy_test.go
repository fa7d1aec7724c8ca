package proxy_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/store"
)

// perClient allows 5 requests a minute per client address (fixed window, so that the whole
// limit comes back exactly one period later).
const perClient = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: fixed_window}
proxy:
  rate_limits:
    - actions: [{remote_address: {}}]
`

// TestExactlyTheLimitPasses: a bounded client loop sends 4x the limit in each of three
// periods; exactly the limit reaches the upstream in each, the rest is answered 429.
func TestExactlyTheLimitPasses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) store.Config
	}{
		{"memory", func(*testing.T) store.Config { return store.Config{} }},
		{"redis", func(t *testing.T) store.Config {
			return store.Config{Backend: store.Backend{URL: "redis://" + testenv.RedisAddr(t), Prefix: "proxytest:" + t.Name() + time.Now().Format(time.RFC3339Nano) + ":"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := tc.store(t)
			up := newUpstream(t)
			p := startProxy(t, up, perClient, func(c *proxy.Config) {
				clock := c.StoreConfig.Clock
				c.StoreConfig = sc
				c.StoreConfig.Clock = clock
			})
			for period := range 3 {
				before := up.hits.Load()
				passed, denied := countPassed(t, p.base+"/x", 20)
				if passed != 5 || denied != 15 {
					t.Errorf("period %d: %d passed, %d denied; want 5 and 15", period, passed, denied)
				}
				if got := up.hits.Load() - before; got != 5 {
					t.Errorf("period %d: %d requests reached the upstream, want 5", period, got)
				}
				p.clock.Advance(time.Minute)
			}
		})
	}
}

// TestExampleRules runs the proxy on examples/proxy/rules.yaml: logins are limited per
// client, and an API key's burst is its own.
func TestExampleRules(t *testing.T) {
	rules, err := os.ReadFile("../examples/proxy/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t)
	p := startProxy(t, up, string(rules))
	if passed, denied := countPassed(t, p.base+"/login", 7); passed != 5 || denied != 2 {
		t.Errorf("/login: %d passed, %d denied; want 5 and 2", passed, denied)
	}
	if passed, denied := countPassed(t, p.base+"/api/items", 25, "X-Api-Key: k1"); passed != 20 || denied != 5 {
		t.Errorf("API key k1: %d passed, %d denied; want its burst of 20", passed, denied)
	}
	if passed, _ := countPassed(t, p.base+"/api/items", 1, "X-Api-Key: k2"); passed != 1 {
		t.Error("API key k2 denied after k1 used its burst")
	}
	// Both limits of an API key are advertised, each with its own numbers (issue 23 item 3:
	// the burst's 2 s window with the day's reset, and no daily limit).
	resp, _ := get(t, p.base+"/api/items", "X-Api-Key: k3")
	checkHeader(t, 0, resp, "RateLimit-Policy", `"edge.remote_address";q=100;w=60, "api_key_burst";q=20;w=2, "api_key_daily";q=10000;w=86400`)
	checkHeader(t, 0, resp, "RateLimit", `"edge.remote_address";r=73;t=\d+, "api_key_burst";r=19;t=1, "api_key_daily";r=9999;t=\d+`)
	resp, body := get(t, p.base+"/api/items", "X-Api-Key: k1")
	checkHeader(t, 0, resp, "RateLimit", `"edge.remote_address";r=73;t=\d+, "api_key_burst";r=0;t=1, "api_key_daily";r=9980;t=\d+`)
	if !strings.Contains(body, `"violated-policies":["api_key_burst"]`) {
		t.Errorf("the 429 of k1's burst: %s", body)
	}
}
