package rls

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/store/memory"
)

// hold is a RulesSource whose Run hands its apply hook to the test.
type hold struct{ apply chan func(*config.Config) }

func (h hold) Run(ctx context.Context, apply func(*config.Config), _ func(error)) {
	h.apply <- apply
	<-ctx.Done()
}

func compileYAML(t *testing.T, yaml string) *config.Config {
	t.Helper()
	doc, err := config.Decode("rules.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tenantRules are n limits of rpu a minute, one per tenant value.
func tenantRules(n, rpu int) string {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - key: tenant\n    value: t%d\n    rate_limit: {unit: minute, requests_per_unit: %d, algorithm: fixed_window}\n", i, rpu)
	}
	return b.String()
}

// TestDecisionsGoOnWhileRulesBuild (issue 31 item 4): a new rules set is built off to the
// side while decisions go on under the rules in force, then swapped in at once: with the
// build held mid-way, decisions are answered (under the old rules, 100 decisions: a count, no
// clock), and the next decision after the swap is under the new rules.
func TestDecisionsGoOnWhileRulesBuild(t *testing.T) {
	mem, err := memory.New(memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	src := hold{apply: make(chan func(*config.Config), 1)}
	e, err := New(Config{Rules: compileYAML(t, tenantRules(1000, 5)), RulesSource: src, Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	apply := <-src.apply
	entered, release := make(chan struct{}), make(chan struct{})
	e.built = func() { close(entered); <-release }
	applied := make(chan struct{})
	go func() { apply(compileYAML(t, tenantRules(1000, 7))); close(applied) }()
	<-entered
	decide := func(i int) uint32 {
		var ans Answer
		req := &Request{Domain: "d", Descriptors: []Descriptor{{Entries: []Entry{{Key: "tenant", Value: fmt.Sprintf("t%d", i)}}}}}
		if err := e.Decide(context.Background(), req, &ans); err != nil {
			t.Fatal(err)
		}
		return ans.Verdicts[0].Remaining
	}
	for i := range 100 { // the build is held: these are answered under the rules in force
		if got := decide(i); got != 4 {
			t.Fatalf("decision %d while the rules build: remaining %d, want 4 (the rules in force, 5 a minute)", i, got)
		}
	}
	close(release)
	<-applied
	if got := decide(100); got != 6 {
		t.Errorf("after the swap: remaining %d, want 6 (the new rules, 7 a minute)", got)
	}
}

// TestReloadKeepsWhatLimitsLearned: a reload carries the state of each limit it keeps
// unchanged (same domain, path and rules) into the new rules set, found by key, not by a scan
// of the old limits: the live view's sketch of a kept limit still shows its keys; a limit
// whose rules changed starts afresh; a limit never decided has no sketch at all.
func TestReloadKeepsWhatLimitsLearned(t *testing.T) {
	mem, err := memory.New(memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	src := hold{apply: make(chan func(*config.Config), 1)}
	e, err := New(Config{Rules: compileYAML(t, tenantRules(3, 5)), RulesSource: src, Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	apply := <-src.apply
	for _, tenant := range []string{"t0", "t1"} {
		var ans Answer
		if err := e.Decide(context.Background(), &Request{Domain: "d", Descriptors: []Descriptor{{Entries: []Entry{{Key: "tenant", Value: tenant}}}}}, &ans); err != nil {
			t.Fatal(err)
		}
	}
	st := e.rules.Load()
	if viewOf(&st.limits[2]) != nil {
		t.Errorf("t2, never decided, has a sketch")
	}
	// t1 now allows 6 a minute: changed; t0 and t2 are kept
	apply(compileYAML(t, strings.Replace(tenantRules(3, 5), "value: t1\n    rate_limit: {unit: minute, requests_per_unit: 5", "value: t1\n    rate_limit: {unit: minute, requests_per_unit: 6", 1)))
	keys := map[string]int{}
	for _, d := range e.Top(10).Domains {
		for _, l := range d.Limits {
			keys[l.FullKey] = len(l.Keys)
		}
	}
	if keys["d.tenant_t0"] != 1 || keys["d.tenant_t1"] != 0 || keys["d.tenant_t2"] != 0 {
		t.Errorf("keys in the live view after the reload: %v; want t0's kept (1), t1's (changed) and t2's empty", keys)
	}
	if now := e.rules.Load(); now.limits[0].rt != st.limits[0].rt || now.limits[1].rt == st.limits[1].rt {
		t.Errorf("runtime state: t0 carried %v, t1 carried %v; want t0's only", now.limits[0].rt == st.limits[0].rt, now.limits[1].rt == st.limits[1].rt)
	}
}
