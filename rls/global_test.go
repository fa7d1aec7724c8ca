package rls_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
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

// windowsOnly is a global store of async mode: it decides windows only.
type windowsOnly struct{ sluicetest.Recorder }

func (*windowsOnly) WindowsOnly() bool { return true }

// TestGlobalScopeRefusedInAsync: with a global store that counts windows only (the regions'
// async mode), a global token bucket is refused when the rules load, naming it.
func TestGlobalScopeRefusedInAsync(t *testing.T) {
	doc, err := config.Decode("rules.yaml", []byte(`
domain: d
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, scope: global}
`))
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := config.Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rls.New(rls.Config{Rules: compiled, GlobalStore: &windowsOnly{}, ReloadInterval: -1})
	if err == nil || !strings.Contains(err.Error(), "token_bucket") || !strings.Contains(err.Error(), "counts windows") {
		t.Fatalf("rls.New: %v, want the global token bucket refused", err)
	}
	_, err = config.CompileWith(config.Options{GlobalWindowsOnly: true}, doc)
	if err == nil || !strings.Contains(err.Error(), "rules.yaml:5: descriptors[0].rate_limit.scope: global limits are counted in windows") {
		t.Fatalf("CompileWith: %v, want the field named", err)
	}
}
