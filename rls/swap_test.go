package rls_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/rls"
)

// hold is a RulesSource whose Run hands its apply hook to the test.
type hold struct{ apply chan func(*config.Config) }

func (h hold) Run(ctx context.Context, apply func(*config.Config), _ func(error)) {
	h.apply <- apply
	<-ctx.Done()
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

// held starts an engine of rules whose source is held by the test: it returns the engine's
// apply hook.
func held(t *testing.T, rules string) (*harness, func(*config.Config)) {
	t.Helper()
	src := hold{apply: make(chan func(*config.Config), 1)}
	h := start(t, rules, func(c *rls.Config) { c.RulesSource = src })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h, <-src.apply
}

func tenant(i int) rls.Descriptor { return desc("tenant", fmt.Sprintf("t%d", i)) }

// TestDecisionsGoOnWhileRulesBuild (issue 31 item 4): a new rules set is built off to the
// side while decisions go on under the rules in force, then swapped in at once: with the
// build held mid-way, decisions are answered (under the old rules, 100 decisions: a count, no
// clock), and the next decision after the swap is under the new rules.
func TestDecisionsGoOnWhileRulesBuild(t *testing.T) {
	h, apply := held(t, tenantRules(1000, 5))
	entered, release := make(chan struct{}), make(chan struct{})
	rls.SetBuilt(h.e, func() { close(entered); <-release })
	applied := make(chan struct{})
	next := testenv.Rules(t, tenantRules(1000, 7))
	go func() { apply(next); close(applied) }()
	<-entered
	for i := range 100 { // the build is held: these are answered under the rules in force
		if got := h.ask(t, "d", tenant(i)).Verdicts[0].Remaining; got != 4 {
			t.Fatalf("decision %d while the rules build: remaining %d, want 4 (the rules in force, 5 a minute)", i, got)
		}
	}
	close(release)
	<-applied
	if got := h.ask(t, "d", tenant(100)).Verdicts[0].Remaining; got != 6 {
		t.Errorf("after the swap: remaining %d, want 6 (the new rules, 7 a minute)", got)
	}
}

// TestReloadKeepsWhatLimitsLearned: a reload carries the state of each limit it keeps
// unchanged (same domain, path and rules) into the new rules set, found by key, not by a scan
// of the old limits: the live view's sketch of a kept limit still shows its keys; a limit
// whose rules changed starts afresh; a limit never decided has no sketch at all.
func TestReloadKeepsWhatLimitsLearned(t *testing.T) {
	h, apply := held(t, tenantRules(3, 5))
	h.ask(t, "d", tenant(0))
	h.ask(t, "d", tenant(1))
	sketched := func() string {
		var keys []string
		h.e.EachTop(10, func(l *config.Limit, top []rls.TopKey) {
			keys = append(keys, fmt.Sprintf("%s:%d", l.FullKey, len(top)))
		})
		sort.Strings(keys)
		return strings.Join(keys, " ")
	}
	if got := sketched(); got != "d.tenant_t0:1 d.tenant_t1:1" {
		t.Fatalf("sketches before the reload: %s, want t0's and t1's (t2 never decided)", got)
	}
	// t1 now allows 6 a minute: changed; t0 and t2 are kept
	apply(testenv.Rules(t, strings.Replace(tenantRules(3, 5), "value: t1\n    rate_limit: {unit: minute, requests_per_unit: 5",
		"value: t1\n    rate_limit: {unit: minute, requests_per_unit: 6", 1)))
	if got := sketched(); got != "d.tenant_t0:1" {
		t.Errorf("sketches after the reload: %s, want t0's kept; t1's (changed) and t2's (never decided) none", got)
	}
}
