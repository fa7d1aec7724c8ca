package rls_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/sluicetest"
)

const globalRules = `
domain: d
descriptors:
  - key: tenant
    rate_limits:
      - {unit: minute, requests_per_unit: 100, algorithm: fixed_window}
      - {unit: day, requests_per_unit: 5000, algorithm: fixed_window, scope: global}
`

// TestGlobalScopeDecidedByTheRegions (issue 37): a limit of scope global goes to the
// regions' store (Config.GlobalStore), its key without the engine's mark, next to the
// cluster limit of the same descriptor, which stays on the store; without regions the store
// decides both, under keys that differ by rule.
func TestGlobalScopeDecidedByTheRegions(t *testing.T) {
	var regions sluicetest.Recorder
	e := newEngineConfig(t, globalRules, rls.Config{GlobalStore: &regions})
	req := &rls.Request{Domain: "d", Descriptors: []rls.Descriptor{desc("tenant", "acme")}}
	var ans rls.Answer
	if err := e.Decide(context.Background(), req, &ans); err != nil {
		t.Fatal(err)
	}
	got := regions.Requests()
	if len(got) != 1 || got[0].Rule.Limit != 5000 || strings.ContainsAny(got[0].Key, "\x00") || !strings.Contains(got[0].Key, "acme") {
		t.Fatalf("the regions' store got %+v, want the global limit's key, unmarked", got)
	}
	alone := newEngine(t, globalRules)
	for i := 0; i < 3; i++ {
		if err := alone.Decide(context.Background(), req, &ans); err != nil {
			t.Fatal(err)
		}
	}
	if ans.Code != rls.CodeOK {
		t.Fatalf("without regions: %+v, want admitted by the store", ans)
	}
}
