package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	gostats "github.com/lyft/gostats"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server/rlsmetrics"
	"github.com/sluicehq/sluice/store/memory"
)

// peerStatsRules are package rls's decision tests' rules.
var peerStatsRules = func() string {
	b, err := os.ReadFile("../rls/testdata/decide.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// peerStatsEngine is an engine of peerStatsRules on a memory store, observed by the metrics of
// package rlsmetrics on reg with the peer's statsd stats in stats.
func peerStatsEngine(t *testing.T, reg *prometheus.Registry, stats gostats.Store, tags map[string]string) *rls.Engine {
	t.Helper()
	rules := testenv.Rules(t, peerStatsRules)
	mem, err := memory.New(memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	m, err := rlsmetrics.New(reg, rlsmetrics.Options{Peer: newPeerStats(stats, tags)})
	if err != nil {
		t.Fatal(err)
	}
	e, err := rls.New(rls.Config{Rules: rules, Store: mem, ReloadInterval: -1, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// desc builds a descriptor from alternating keys and values.
func desc(kv ...string) rls.Descriptor {
	var d rls.Descriptor
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, rls.Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// TestPeerStatsMatchSeries (property): over random requests of random costs, every statsd
// counter of envoyproxy/ratelimit's names (ratelimit.service.rate_limit.<key>.<stat>, with
// the EXTRA_TAGS) holds what the same stat's Prometheus series holds.
func TestPeerStatsMatchSeries(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		stats := gostats.NewStore(gostats.NewNullSink(), false)
		reg := prometheus.NewRegistry()
		e := peerStatsEngine(t, reg, stats, map[string]string{"zone": "a"})
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
				line := testenv.MetricLine(t, reg, fmt.Sprintf(`ratelimit_service_rate_limit_%s{domain="d",key1="%s",key2=""}`, stat, key))
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
