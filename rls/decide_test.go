package rls_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server/rlsmetrics"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// decideRules are the rules of the decision tests.
var decideRules = readTestdata("decide.yaml")

// readTestdata returns the text of a file of testdata.
func readTestdata(name string) string {
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// newEngine builds an engine of rules (YAML text) over a memory store.
func newEngine(t *testing.T, rules string) *rls.Engine {
	t.Helper()
	return newEngineConfig(t, rules, rls.Config{})
}

// newEngineConfig is newEngine with the other fields of cfg (its Store, when set, in place of
// the memory store).
func newEngineConfig(t *testing.T, rules string, cfg rls.Config) *rls.Engine {
	t.Helper()
	compiled := testenv.Rules(t, rules)
	if cfg.Store == nil {
		mem, err := memory.New(memory.WithSweepInterval(-1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mem.Close() })
		cfg.Store = mem
	}
	cfg.Rules, cfg.ReloadInterval = compiled, -1
	return observed(t, cfg)
}

// registries are the registries of the engines observed by the tests' metrics (metric).
var registries sync.Map // *rls.Engine -> *prometheus.Registry

// observed builds an engine of cfg whose Observer, unless cfg has one, is the metrics of
// package rlsmetrics on a registry of its own (read by metric).
func observed(t *testing.T, cfg rls.Config) *rls.Engine {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := rlsmetrics.New(reg, rlsmetrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Observer == nil {
		cfg.Observer = m
	}
	e, err := rls.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := m.Attach(e); err != nil {
		t.Fatal(err)
	}
	registries.Store(e, reg)
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

// metric returns the line of the engine's metrics page that starts with prefix, or "".
func metric(t *testing.T, e *rls.Engine, prefix string) string {
	t.Helper()
	reg, _ := registries.Load(e)
	return testenv.MetricLine(t, reg.(*prometheus.Registry), prefix)
}

// TestDecideInProcess: Decide answers with one verdict per descriptor: the binding rule,
// the decision, and whether it denies (never in shadow mode).
func TestDecideInProcess(t *testing.T) {
	e := newEngine(t, decideRules)
	req := &rls.Request{Domain: "d", Descriptors: []rls.Descriptor{
		desc("a", "1"), desc("shadow", "1"), desc("free", "1"), desc("nothing", "1")}}
	var ans rls.Answer
	for i, wantDenied := range []bool{false, false, true} {
		if err := e.Decide(context.Background(), req, &ans); err != nil {
			t.Fatal(err)
		}
		vs := ans.Verdicts
		if len(vs) != 4 {
			t.Fatalf("%d verdicts, want 4", len(vs))
		}
		a, shadow, free, nothing := vs[0], vs[1], vs[2], vs[3]
		if !a.Limited || a.Limit == nil || a.Limit.FullKey != "d.a" || a.Denied() != wantDenied || a.Decision.Allowed == wantDenied {
			t.Errorf("request %d: a: %+v", i, a)
		}
		if a.Rule.Limit != 2 || a.Decision.Capacity != 2 { // the minute rule binds
			t.Errorf("request %d: a: binding rule %v, decision limit %d; want the limit of 2", i, a.Rule, a.Decision.Capacity)
		}
		if shadow.Denied() || !shadow.Limited || shadow.Decision.Allowed != (i == 0) {
			t.Errorf("request %d: shadow: %+v", i, shadow)
		}
		if free.Limited || free.Limit == nil || !free.Limit.Unlimited || nothing.Limited || nothing.Limit != nil {
			t.Errorf("request %d: free %+v, nothing %+v", i, free, nothing)
		}
	}
	if line := metric(t, e, `sluice_decisions_total{domain="d",result="over_limit",rule="d.a"}`); line == "" {
		t.Error("Decide's denial not counted in the metrics")
	}
	// An unknown domain applies no limit (envoyproxy/ratelimit's behaviour), as over gRPC.
	if err := e.Decide(context.Background(), &rls.Request{Domain: "nope", Descriptors: req.Descriptors}, &ans); err != nil {
		t.Errorf("unknown domain: %v, want no error", err)
	}
	for i, v := range ans.Verdicts {
		if v.Limited || v.Denied() {
			t.Errorf("unknown domain: verdict %d %+v, want no limit applied", i, v)
		}
	}
}

// TestDecideBlock: a limit of requests_per_unit 0 blocks without a store call; its verdict is
// over the limit and can never be allowed.
func TestDecideBlock(t *testing.T) {
	e := newEngine(t, `
domain: edge
descriptors:
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
`)
	var ans rls.Answer
	req := &rls.Request{Domain: "edge", Descriptors: []rls.Descriptor{desc("remote_address", "50.0.0.5")}}
	if err := e.Decide(context.Background(), req, &ans); err != nil {
		t.Fatal(err)
	}
	v := ans.Verdicts[0]
	if ans.Code != rls.CodeOverLimit || !v.Limited || !v.Block || !v.Denied() || !v.Never || v.Remaining != 0 || v.Reset != time.Second {
		t.Errorf("answer %v, verdict %+v; want a block over its limit, reset in 1s", ans.Code, v)
	}
}

// TestEngineClock: the engine reads the time of Config.Clock, not the system's: a block's
// reset is the rest of its window on that clock.
func TestEngineClock(t *testing.T) {
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 10, 0, time.UTC))
	e := newEngineConfig(t, `
domain: edge
descriptors:
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: minute, requests_per_unit: 0}
`, rls.Config{Clock: clock})
	req := &rls.Request{Domain: "edge", Descriptors: []rls.Descriptor{desc("remote_address", "50.0.0.5")}}
	for _, want := range []time.Duration{50 * time.Second, 30 * time.Second} {
		var ans rls.Answer
		if err := e.Decide(context.Background(), req, &ans); err != nil {
			t.Fatal(err)
		}
		if got := ans.Verdicts[0].Reset; got != want {
			t.Errorf("block's reset at %v: %v, want %v", clock.Now().Format(time.TimeOnly), got, want)
		}
		clock.Advance(20 * time.Second)
	}
}
