package rls_test

import (
	"context"
	"github.com/sluicehq/sluice/rls"
	"testing"
)

// TestDecideRuleDecisions: a descriptor of several rate_limits reports each rule's own
// decision (issue 23 item 3), the one over its limit denied, the others with their own
// numbers; the combined decision is unchanged.
func TestDecideRuleDecisions(t *testing.T) {
	e := newEngine(t, `
domain: d
descriptors:
  - key: k
    rate_limits:
      - {unit: day, requests_per_unit: 100, algorithm: fixed_window, name: b}
      - {unit: hour, requests_per_unit: 5, algorithm: fixed_window, name: a}
`)
	var ans rls.Answer
	req := &rls.Request{Domain: "d", Descriptors: []rls.Descriptor{desc("k", "v")}}
	for i := range 6 {
		if err := e.Decide(context.Background(), req, &ans); err != nil {
			t.Fatal(err)
		}
		v := ans.Verdicts[0]
		if len(v.Decisions) != 2 {
			t.Fatalf("request %d: %d rule decisions, want 2", i, len(v.Decisions))
		}
		b, a := v.Decisions[0], v.Decisions[1]
		if i < 5 {
			if !b.Allowed || !a.Allowed || b.Capacity != 100 || b.Remaining != int64(99-i) || a.Capacity != 5 || a.Remaining != int64(4-i) {
				t.Errorf("request %d: b %+v, a %+v", i, b, a)
			}
			continue
		}
		if !v.Denied() || !b.Allowed || a.Allowed || b.Remaining != 95 || a.Remaining != 0 || a.RetryAfter <= 0 {
			t.Errorf("denied request: verdict %+v; want b allowed with 95 left, a denied", v)
		}
	}
}
