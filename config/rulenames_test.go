package config_test

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// TestRuleNames: every rule of a descriptor has its own name, the rate_limit's when set,
// else the full key, suffixed with the rate_limit's index after the first.
func TestRuleNames(t *testing.T) {
	c := mustCompile(t, `
domain: d
descriptors:
  - key: one
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: named
    rate_limits:
      - {period: 60s, requests_per_unit: 100, name: b}
      - {period: 10s, requests_per_unit: 5, name: a}
  - key: unnamed
    rate_limits:
      - {period: 1s, requests_per_unit: 10}
      - {unit: day, requests_per_unit: 10000}
      - {unit: hour, requests_per_unit: 500, name: hourly}
`)
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{"one", []string{"d.one"}},
		{"named", []string{"b", "a"}},
		{"unnamed", []string{"d.unnamed", "d.unnamed[1]", "hourly"}},
	} {
		l := config.Lookup(c.Domain("d"), []entry{{tc.key, "x"}})
		if l == nil || !slices.Equal(l.RuleNames, tc.want) || len(l.RuleNames) != len(l.Rules) {
			t.Errorf("%s: RuleNames %q, want %q", tc.key, l.RuleNames, tc.want)
		}
	}
}
