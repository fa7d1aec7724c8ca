package rls_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/store/memory"
)

const inFlightRules = `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: fixed_window}
    max_in_flight: 1
  - key: b
    max_in_flight: {limit: 2, lease: 5s}
`

// An engine whose transport does not enforce max_in_flight (sluice serve's RLS) refuses rules
// that have one, from a file and on reload, and static rules alike, saying why; one with
// Config.InFlight (sluice proxy) loads them, and answers the rate limits as before (a
// descriptor with only max_in_flight is not rate limited).
func TestInFlightRefusedWithoutATransportThatEnforcesIt(t *testing.T) {
	mem, err := memory.New(memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte(inFlightRules), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = rls.New(rls.Config{RulesPath: path, Store: mem, ReloadInterval: -1})
	if err == nil || !strings.Contains(err.Error(), "descriptors[0].max_in_flight: not enforced here: the RLS protocol has no request-finished signal") {
		t.Errorf("file: %v", err)
	}
	doc, err := config.Decode("rules.yaml", []byte(inFlightRules))
	if err != nil {
		t.Fatal(err)
	}
	static, err := config.Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rls.New(rls.Config{Rules: static, Store: mem}); err == nil || !strings.Contains(err.Error(), "d.a: max_in_flight is not enforced here") {
		t.Errorf("static rules: %v", err)
	}

	// a reload to rules with max_in_flight is refused; the previous rules keep serving
	if err := os.WriteFile(path, []byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := rls.New(rls.Config{RulesPath: path, Store: mem, ReloadInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := os.WriteFile(path, []byte(inFlightRules+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.Reload(); ok || err == nil || !strings.Contains(err.Error(), "max_in_flight") {
		t.Errorf("reload: %v %v", ok, err)
	}

	withInFlight, err := rls.New(rls.Config{RulesPath: path, Store: mem, ReloadInterval: -1, InFlight: true})
	if err != nil {
		t.Fatalf("with InFlight: %v", err)
	}
	defer withInFlight.Close()
	var ans rls.Answer
	req := &rls.Request{Domain: "d", Descriptors: []rls.Descriptor{desc("b", "x")}}
	for range 5 {
		if err := withInFlight.Decide(context.Background(), req, &ans); err != nil || ans.Code != rls.CodeOK {
			t.Fatalf("max_in_flight alone: %+v %v", ans, err)
		}
	}
}

const adaptiveRules = `
domain: d
descriptors:
  - {key: route, value: /report, max_in_flight: 3}
  - {key: route, value: /llm, max_in_flight: {adaptive: {floor: 2, ceiling: 40, initial: 8}}}
`

// TestAdaptiveInFlightState: the rules hold an adaptive max_in_flight as settings; the engine
// keeps the limit that learns (Verdict.Adaptive), outside the rules, so a reload that keeps
// the settings keeps what it learned, and one that changes them starts anew. A fixed
// max_in_flight has none: it ignores round trips.
func TestAdaptiveInFlightState(t *testing.T) {
	mem, err := memory.New(memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(adaptiveRules), 0o644); err != nil {
		t.Fatal(err)
	}
	e := observed(t, rls.Config{RulesPath: path, Store: mem, ReloadInterval: -1, InFlight: true})
	verdict := func(route string) rls.Verdict {
		t.Helper()
		var ans rls.Answer
		if err := e.Decide(context.Background(), &rls.Request{Domain: "d", Descriptors: []rls.Descriptor{desc("route", route)}}, &ans); err != nil {
			t.Fatal(err)
		}
		return ans.Verdicts[0]
	}
	report, llm := verdict("/report"), verdict("/llm")
	if report.Key == "" || report.Adaptive != nil {
		t.Errorf("/report: key %q, adaptive %v; want a key and a fixed limit", report.Key, report.Adaptive)
	}
	g := llm.Adaptive
	if g == nil || g.Limit() != 8 {
		t.Fatalf("/llm: adaptive %v, want a limit starting at 8", g)
	}
	// the adaptive limit follows what it is told: busy and steady, it grows
	for range 20 {
		g.Observe(10*time.Millisecond, g.Limit())
	}
	grown := g.Limit()
	if grown <= 8 {
		t.Errorf("adaptive limit %d after steady samples, want above 8", grown)
	}
	// a reload that keeps the settings keeps the limit (another limit changes meanwhile)
	if err := os.WriteFile(path, []byte(strings.Replace(adaptiveRules, "max_in_flight: 3}", "max_in_flight: 4}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.Reload(); !ok || err != nil {
		t.Fatalf("reload: %v %v", ok, err)
	}
	if got := verdict("/llm").Adaptive; got != g || got.Limit() != grown {
		t.Errorf("after a reload keeping its settings: adaptive %p at %d, want %p at %d", got, got.Limit(), g, grown)
	}
	// new settings: a new limit
	if err := os.WriteFile(path, []byte(strings.Replace(adaptiveRules, "initial: 8", "initial: 6", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.Reload(); !ok || err != nil {
		t.Fatalf("reload: %v %v", ok, err)
	}
	if got := verdict("/llm").Adaptive; got == g || got.Limit() != 6 {
		t.Errorf("after new settings: adaptive %p at %d, want a new limit at 6", got, got.Limit())
	}
}
