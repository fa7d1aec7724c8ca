package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestServeOnRedisTopologies serves on Sentinel and Cluster (when the test environment has
// them: scripts/test.d/redis-topologies.sh) and checks that one limit holds.
func TestServeOnRedisTopologies(t *testing.T) {
	urls := map[string]func(t *testing.T) string{
		"sentinel": func(t *testing.T) string {
			addrs, master := testenv.Sentinel(t)
			return "redis-sentinel://" + strings.Join(addrs, ",") + "/" + master
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
