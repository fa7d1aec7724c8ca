package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

func TestScopeLayersClusterAndLocalRules(t *testing.T) {
	doc, err := config.Decode("rules.yaml", []byte(`
domain: api
descriptors:
  - key: tenant
    rate_limits:
      - {unit: minute, requests_per_unit: 100}
      - {unit: second, requests_per_unit: 10, scope: local}
      - {unit: hour, requests_per_unit: 1000, scope: cluster}
      - {unit: day, requests_per_unit: 5000, scope: global}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	tenant := config.Lookup(c.Domain("api"), []entry{{"tenant", "x"}})
	if got := []bool{tenant.IsLocal(0), tenant.IsLocal(1), tenant.IsLocal(2), tenant.IsLocal(3)}; got[0] || !got[1] || got[2] || got[3] {
		t.Errorf("tenant scopes local = %v, want [false true false false]", got)
	}
	if got := []bool{tenant.IsGlobal(0), tenant.IsGlobal(1), tenant.IsGlobal(2), tenant.IsGlobal(3)}; got[0] || got[1] || got[2] || !got[3] {
		t.Errorf("tenant scopes global = %v, want [false false false true]", got)
	}
	user := config.Lookup(c.Domain("api"), []entry{{"user", "x"}})
	if user.Local != nil || user.IsLocal(0) || user.Global != nil || user.IsGlobal(0) {
		t.Errorf("user has no local or global rule, got Local = %v, Global = %v", user.Local, user.Global)
	}
}

func TestPolicyFixtures(t *testing.T) {
	want := map[string]string{
		"bad_shares.yaml":           "bad_shares.yaml:4: descriptors[0].rate_limit.criticality.shares.sheddable: must be in (0, 1], got 1.5",
		"hot_with_value.yaml":       "hot_with_value.yaml:5: descriptors[0].hot: set on a descriptor with a value",
		"hot_on_rate_limits.yaml":   "hot_on_rate_limits.yaml:4: descriptors[0].hot: needs one rate_limit",
		"hot_bad_fields.yaml":       `hot_bad_fields.yaml:4: descriptors[0].hot: unknown field "colour"`,
		"hot_bad_values.yaml":       "hot_bad_values.yaml:4: descriptors[0].hot.top_k: must be positive, got -1\nconfig: invalid rules: hot_bad_values.yaml:7: descriptors[1].hot.cold_limit: 11 is above the rule's capacity 10",
		"bad_scope.yaml":            `bad_scope.yaml:4: descriptors[0].rate_limit.scope: want cluster, local or global, got "region"`,
		"unlimited_with_scope.yaml": "unlimited_with_scope.yaml:4: descriptors[0].rate_limit.unlimited: should not specify unit, period, algorithm, burst or scope",
	}
	files, _ := filepath.Glob("testdata/policy/*.yaml")
	if len(files) != len(want) {
		t.Errorf("%d fixtures, %d expectations", len(files), len(want))
	}
	for _, f := range files {
		_, err := config.Load(f)
		if err == nil {
			t.Errorf("%s: loaded without error", f)
			continue
		}
		msg := strings.ReplaceAll(err.Error(), "testdata/policy/", "")
		if w := want[filepath.Base(f)]; !strings.Contains(msg, w) {
			t.Errorf("%s: error %q does not contain %q", f, msg, w)
		}
	}
}
