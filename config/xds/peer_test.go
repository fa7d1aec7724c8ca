package xds_test

// The cases of envoyproxy/ratelimit's xDS provider test (test/provider/
// xds_grpc_sotw_provider_test.go, TestXdsProvider), ported: each snapshot in turn over one
// stream, the rules compared in the peer's config.Dump format. The peer's deeper case sets
// quota_mode on a descriptor; go-control-plane's ratelimit module (v0.1.0, the one released)
// has no quota_mode field, so that line reads quota_mode: false here.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/xds"
	"github.com/sluicehq/sluice/internal/testenv"
)

func limit(unit rlsconf.RateLimitUnit, n uint32) *rlsconf.RateLimitPolicy {
	return &rlsconf.RateLimitPolicy{Unit: unit, RequestsPerUnit: n}
}

var unlimited = &rlsconf.RateLimitPolicy{Unlimited: true}

func TestPeerXdsProviderCases(t *testing.T) {
	cases := []struct {
		name  string
		merge bool
		res   []*rlsconf.RateLimitConfig
		want  []string
	}{
		{"initial xDS config", false, []*rlsconf.RateLimitConfig{
			{Name: "foo", Domain: "foo", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k1", Value: "v1", RateLimit: limit(rlsconf.RateLimitUnit_MINUTE, 3)}}},
		}, []string{"foo.k1_v1: unit=MINUTE requests_per_unit=3, shadow_mode: false, quota_mode: false"}},
		{"new (after initial) xDS config update", false, []*rlsconf.RateLimitConfig{
			{Name: "foo", Domain: "foo", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k2", Value: "v2", RateLimit: limit(rlsconf.RateLimitUnit_MINUTE, 5)}}},
		}, []string{"foo.k2_v2: unit=MINUTE requests_per_unit=5, shadow_mode: false, quota_mode: false"}},
		{"multi domain xDS config update", false, []*rlsconf.RateLimitConfig{
			{Name: "foo", Domain: "foo", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k1", Value: "v1", RateLimit: limit(rlsconf.RateLimitUnit_MINUTE, 10)}}},
			{Name: "bar", Domain: "bar", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k1", Value: "v1", RateLimit: limit(rlsconf.RateLimitUnit_MINUTE, 100)}}},
		}, []string{
			"bar.k1_v1: unit=MINUTE requests_per_unit=100, shadow_mode: false, quota_mode: false",
			"foo.k1_v1: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false",
		}},
		{"limits with deeper xDS config update", false, []*rlsconf.RateLimitConfig{
			{Name: "foo", Domain: "foo", Descriptors: []*rlsconf.RateLimitDescriptor{
				{Key: "k1", Value: "v1", RateLimit: limit(rlsconf.RateLimitUnit_MINUTE, 10), Descriptors: []*rlsconf.RateLimitDescriptor{
					{Key: "k2", RateLimit: unlimited},
					{Key: "k2", Value: "v2", RateLimit: limit(rlsconf.RateLimitUnit_HOUR, 15)},
				}},
				{Key: "j1", Value: "v2", RateLimit: unlimited, Descriptors: []*rlsconf.RateLimitDescriptor{
					{Key: "j2", RateLimit: unlimited},
					{Key: "j2", Value: "v2", RateLimit: limit(rlsconf.RateLimitUnit_DAY, 15), ShadowMode: true},
				}},
			}},
			{Name: "bar", Domain: "bar", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k1", Value: "v1", RateLimit: limit(rlsconf.RateLimitUnit_MINUTE, 100)}}},
		}, []string{
			"bar.k1_v1: unit=MINUTE requests_per_unit=100, shadow_mode: false, quota_mode: false",
			"foo.j1_v2.j2: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false",
			"foo.j1_v2.j2_v2: unit=DAY requests_per_unit=15, shadow_mode: true, quota_mode: false",
			"foo.j1_v2: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false",
			"foo.k1_v1.k2: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false",
			"foo.k1_v1.k2_v2: unit=HOUR requests_per_unit=15, shadow_mode: false, quota_mode: false",
			"foo.k1_v1: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false",
		}},
		{"same domain multiple times xDS config update (MERGE_DOMAIN_CONFIG)", true, []*rlsconf.RateLimitConfig{
			{Name: "foo-1", Domain: "foo", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k1", Value: "v1", RateLimit: limit(rlsconf.RateLimitUnit_MINUTE, 10)}}},
			{Name: "foo-2", Domain: "foo", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k1", Value: "v2", RateLimit: limit(rlsconf.RateLimitUnit_MINUTE, 100)}}},
		}, []string{
			"foo.k1_v1: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false",
			"foo.k1_v2: unit=MINUTE requests_per_unit=100, shadow_mode: false, quota_mode: false",
		}},
	}
	srv := testenv.StartXDS(t, "127.0.0.1:0", "test-node", nil)
	applied := make(chan *config.Config, len(cases))
	for i, c := range cases {
		if c.merge { // the peer sets MERGE_DOMAIN_CONFIG for this case: a client of its own
			srv = testenv.StartXDS(t, "127.0.0.1:0", "test-node", nil)
		}
		if i == 0 || c.merge {
			client := newClient(t, xds.Options{Server: srv.Addr, NodeID: "test-node", Rules: config.Options{MergeDomains: c.merge}})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				client.Run(ctx, func(c *config.Config) { applied <- c }, func(err error) { t.Errorf("rejected: %v", err) })
			}()
			t.Cleanup(func() { cancel(); <-done })
		}
		version := fmt.Sprint(i + 1)
		srv.Set(t, version, c.res...)
		var rules *config.Config
		select {
		case rules = <-applied:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no rules applied within 10s", c.name)
		}
		testenv.Eventually(t, 10*time.Second, c.name+": ACK", func() bool { return srv.Acked(version) })
		got := dump(rules)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
