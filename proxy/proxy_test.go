package proxy_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/stores"
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
		store func(t *testing.T) stores.Config
	}{
		{"memory", func(*testing.T) stores.Config { return stores.Config{} }},
		{"redis", func(t *testing.T) stores.Config {
			return stores.Config{URL: "redis://" + testenv.RedisAddr(t), Prefix: "proxytest:" + t.Name() + time.Now().Format(time.RFC3339Nano) + ":"}
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
