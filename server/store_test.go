package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/server"
)

// TestStoreURLs: every supported store URL opens (Redis clients connect lazily, so no
// server is needed to parse them) and closes; bad URLs are errors naming what is wrong.
func TestStoreURLs(t *testing.T) {
	for _, u := range []string{
		"", "memory", "memory://",
		"redis://127.0.0.1:1", "redis://user:secret@127.0.0.1:1/3?dial_timeout=50ms&pool_size=4",
		"rediss://127.0.0.1:1/0",
		"redis-cluster://127.0.0.1:1", "redis-cluster://127.0.0.1:1,127.0.0.1:2,localhost:3?dial_timeout=50ms",
		"redis-sentinel://127.0.0.1:1/mymaster", "redis-sentinel://u:p@127.0.0.1:1,127.0.0.1:2/mymaster?password=data&db=2",
	} {
		st, err := server.OpenStore(server.StoreOptions{URL: u})
		if err != nil {
			t.Errorf("%q: %v", u, err)
			continue
		}
		c, ok := st.(sluice.Closer)
		if !ok {
			t.Errorf("%q: store is not a Closer", u)
			continue
		}
		if err := c.Close(); err != nil {
			t.Errorf("%q: Close: %v", u, err)
		}
	}
	for _, tc := range []struct{ url, names string }{
		{"nosuch://x", "scheme"},
		{"http://127.0.0.1:6379", "scheme"},
		{"redis://", "host"},
		{"redis://127.0.0.1", "host"},
		{"redis://127.0.0.1:6379/x", "path"},
		{"redis://127.0.0.1:6379?colour=red", "colour"},
		{"redis://127.0.0.1:6379?dial_timeout=soon", "dial_timeout"},
		{"redis-cluster://127.0.0.1:1,127.0.0.1:2/3", "path"},
		{"redis-cluster://127.0.0.1:1,nohostport", "host"},
		{"redis-sentinel://127.0.0.1:1,127.0.0.1:2", "path"},
		{"redis-sentinel://127.0.0.1:1/a/b", "path"},
	} {
		st, err := server.OpenStore(server.StoreOptions{URL: tc.url})
		if err == nil {
			st.(sluice.Closer).Close()
			t.Errorf("%q: no error", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.names) {
			t.Errorf("%q: %v does not name %s", tc.url, err, tc.names)
		}
	}
}

// TestStoreOptionsValidated: a bad mode or fallback is refused before anything opens.
func TestStoreOptionsValidated(t *testing.T) {
	for _, tc := range []struct {
		opts  server.StoreOptions
		names string
	}{
		{server.StoreOptions{Mode: "psychic"}, "mode"},
		{server.StoreOptions{Fallback: "pray"}, "fallback"},
		{server.StoreOptions{URL: "redis://127.0.0.1:1", Mode: "Sync"}, "mode"},
		{server.StoreOptions{URL: "redis://127.0.0.1:1", Timeout: -time.Second}, "timeout"},
	} {
		if _, err := server.OpenStore(tc.opts); err == nil || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("%+v: %v, want an error naming %s", tc.opts, err, tc.names)
		}
	}
	for _, mode := range []string{"", "sync", "overlimit", "async"} {
		for _, fb := range []string{"", "local", "fail_open", "fail_closed"} {
			st, err := server.OpenStore(server.StoreOptions{Mode: mode, Fallback: fb})
			if err != nil {
				t.Errorf("mode %q fallback %q: %v", mode, fb, err)
				continue
			}
			st.(sluice.Closer).Close()
		}
	}
}

// TestServeOnRedisTopologies serves on Sentinel and Cluster (when the test environment has
// them: scripts/test.d/redis-topologies.sh) and checks that one limit holds.
func TestServeOnRedisTopologies(t *testing.T) {
	urls := map[string]func(t *testing.T) string{
		"sentinel": func(t *testing.T) string {
			return "redis-sentinel://" + strings.Join(testenv.List(t, "SLUICE_REDIS_SENTINEL_ADDRS"), ",") +
				"/" + testenv.Get(t, "SLUICE_REDIS_SENTINEL_MASTER")
		},
		"cluster": func(t *testing.T) string {
			return "redis-cluster://" + strings.Join(testenv.List(t, "SLUICE_REDIS_CLUSTER_ADDRS"), ",")
		},
	}
	for name, u := range urls {
		t.Run(name, func(t *testing.T) {
			h := (&harness{}).run(t, redisConfig(t, u(t)))
			tenant := "t-" + name + "-" + randomSuffix()
			allowed := 0
			for range 15 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				resp, err := h.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "shared", Descriptors: []*rlcommon.RateLimitDescriptor{desc("tenant", tenant)}})
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if resp.OverallCode.String() == "OK" {
					allowed++
				}
			}
			if allowed != 10 {
				t.Errorf("%s: admitted %d, want the limit 10", name, allowed)
			}
		})
	}
}
