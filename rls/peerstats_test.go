package rls_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	gostats "github.com/lyft/gostats"

	"github.com/sluicehq/sluice/rls"
)

// TestPeerStatsMatchSeries (property): over random requests of random costs, every statsd
// counter of envoyproxy/ratelimit's names (ratelimit.service.rate_limit.<key>.<stat>, with
// the EXTRA_TAGS) holds what the same stat's Prometheus series holds.
func TestPeerStatsMatchSeries(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		stats := gostats.NewStore(gostats.NewNullSink(), false)
		e := newEngineConfig(t, decideRules, rls.Config{PeerStats: stats, PeerStatsTags: map[string]string{"zone": "a"}})
		var ans rls.Answer
		for range 1 + r.IntN(40) {
			hits := uint64(r.IntN(4))
			d := desc([]string{"a", "shadow"}[r.IntN(2)], "v")
			d.HitsAddend = &hits
			if err := e.Decide(context.Background(), &rls.Request{Domain: "d", Descriptors: []rls.Descriptor{d}}, &ans); err != nil {
				t.Fatal(err)
			}
		}
		scope := stats.ScopeWithTags("ratelimit", map[string]string{"zone": "a"}).Scope("service").Scope("rate_limit")
		for _, key := range []string{"a", "shadow"} {
			for _, stat := range []string{"total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"} {
				got := scope.NewCounter("d." + key + "." + stat).Value()
				line := metric(t, e, fmt.Sprintf(`ratelimit_service_rate_limit_%s{domain="d",key1="%s",key2=""}`, stat, key))
				want := uint64(0)
				if line != "" {
					f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
					want = uint64(f)
				}
				if got != want {
					t.Errorf("seed %d: d.%s.%s: statsd %d, Prometheus %d", seed, key, stat, got, want)
				}
			}
		}
	}
}
