package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/config"
)

// problemsOf lists the problems joined in err; every one must be a *config.Problem.
func problemsOf(t *testing.T, err error) []*config.Problem {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out []*config.Problem
	for _, e := range errs {
		var p *config.Problem
		if !errors.As(e, &p) {
			t.Errorf("%v is not a *config.Problem", e)
			continue
		}
		out = append(out, p)
	}
	return out
}

// TestEveryProblemOfEveryFile: one Load reports the misspelled field, the value of the wrong
// kind and the invalid values of every file, each with file, line and YAML path, and nothing
// that only repeats them.
func TestEveryProblemOfEveryFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", `domain: a
descriptors:
  - key: k
    rate_limit:
      unit: secnd
      requests_per_unt: 5
  - key: l
    rate_limit: {unit: minute, requests_per_unit: many}
  - key: m
    rate_limit: 10
`)
	write("b.yaml", `domain: b
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: -1}
  - key: j
    rate_limits: {unit: minute}
`)
	_, err := config.Load(dir)
	if err == nil {
		t.Fatal("loaded")
	}
	got := map[string]bool{}
	for _, p := range problemsOf(t, err) {
		got[fmt.Sprintf("%s:%d: %s", filepath.Base(p.File), p.Line, p.Path)] = true
	}
	want := []string{
		"a.yaml:5: descriptors[0].rate_limit.unit",
		"a.yaml:6: descriptors[0].rate_limit",
		"a.yaml:8: descriptors[1].rate_limit.requests_per_unit",
		"a.yaml:10: descriptors[2].rate_limit",
		"b.yaml:4: descriptors[0].rate_limit.requests_per_unit",
		"b.yaml:6: descriptors[1].rate_limits",
	}
	for _, w := range want {
		if !got[w] {
			t.Errorf("no problem at %s", w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(got), len(want), err)
	}
	msg := err.Error()
	for _, w := range []string{`unknown field "requests_per_unt"`, `want an integer, got "many"`, `unknown unit "secnd"`,
		`want a mapping of fields (key: value), got "10"`, "want a list (- item), got a mapping", "must not be negative"} {
		if !strings.Contains(msg, w) {
			t.Errorf("%q not in\n%s", w, msg)
		}
	}
	if strings.Index(msg, "a.yaml:5:") > strings.Index(msg, "a.yaml:6:") || strings.Index(msg, "a.yaml:10:") > strings.Index(msg, "b.yaml:4:") {
		t.Errorf("problems not in file and line order:\n%s", msg)
	}
}

// richRules uses every kind of field: descriptors, both rate-limit forms, hot, criticality,
// proxy actions with header matchers, quota buckets.
const richRules = `domain: rich
descriptors:
  - key: api_key
    rate_limits:
      - {period: 1s, requests_per_unit: 10, algorithm: token_bucket, burst: 20, name: burst}
      - {unit: day, requests_per_unit: 10000, name: daily, replaces: [{name: other}]}
  - key: user
    hot: {top_k: 10, cold_limit: 5}
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: tier
    value: gold
    shadow_mode: true
    metadata: {owner: team}
    rate_limit:
      unit: minute
      requests_per_unit: 100
      criticality: {critical: 0.5, sheddable: 0.2}
    descriptors:
      - key: path
        value: "/api/*"
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 5, unit_multiplier: 2}
proxy:
  rate_limits:
    - actions: [{remote_address: {ipv6_prefix: 64}}]
    - actions:
        - header_value_match:
            descriptor_key: tier
            descriptor_value: gold
            headers: [{name: x-tier, exact_match: gold}]
quota_buckets:
  - name: login
    bucket_id: {name: login}
    requests_per_unit: 100
    unit: minute
`

// TestProblemPathsProperty: replacing any value of a valid file by a value of the wrong kind
// (a list where a scalar or mapping is, a mapping where a list is) gives a problem at that
// value's own line and YAML path, whatever the value.
func TestProblemPathsProperty(t *testing.T) {
	if _, err := config.Decode("rich.yaml", []byte(richRules)); err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(richRules), &root); err != nil {
		t.Fatal(err)
	}
	type site struct {
		path string
		node *yaml.Node
	}
	var sites []site
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			walk(n.Content[0], path)
			return
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if path != "" {
					p = path + "." + p
				}
				if strings.HasSuffix(path, "metadata") || strings.HasSuffix(path, "bucket_id") {
					continue // free-form values: any kind fits
				}
				sites = append(sites, site{p, n.Content[i+1]})
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				sites = append(sites, site{p, c})
				walk(c, p)
			}
		}
	}
	walk(&root, "")
	if len(sites) < 60 {
		t.Fatalf("only %d sites", len(sites))
	}
	for _, s := range sites {
		if strings.HasSuffix(s.path, ".metadata") || strings.HasSuffix(s.path, ".bucket_id") {
			continue
		}
		saved := *s.node
		if s.node.Kind == yaml.SequenceNode {
			*s.node = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: saved.Line, Content: []*yaml.Node{
				{Kind: yaml.ScalarNode, Tag: "!!str", Value: "x"}, {Kind: yaml.ScalarNode, Tag: "!!str", Value: "y"}}}
		} else {
			*s.node = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: saved.Line, Style: yaml.FlowStyle,
				Content: []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!int", Value: "1"}}}
		}
		data, err := yaml.Marshal(&root)
		*s.node = saved
		if err != nil {
			t.Fatal(err)
		}
		_, err = config.Decode("rich.yaml", data)
		if err == nil {
			t.Errorf("%s: a value of the wrong kind decoded", s.path)
			continue
		}
		found := false
		for _, p := range problemsOf(t, err) {
			found = found || (p.Path == s.path && p.File == "rich.yaml" && p.Line > 0)
		}
		if !found {
			t.Errorf("%s: no problem at that path:\n%v", s.path, err)
		}
	}
}

// TestRateLimitsCounted: a descriptor with 4 rate_limits counts 4.
func TestRateLimitsCounted(t *testing.T) {
	c := mustCompile(t, `domain: d
descriptors:
  - key: a
    rate_limits:
      - {unit: second, requests_per_unit: 1}
      - {unit: minute, requests_per_unit: 10}
      - {unit: hour, requests_per_unit: 100}
      - {unit: day, requests_per_unit: 0}
  - key: b
    rate_limit: {unlimited: true}
  - key: c
`)
	if n := c.RateLimits(); n != 5 {
		t.Errorf("RateLimits() = %d, want 5", n)
	}
	if n := len(c.Limits()); n != 2 {
		t.Errorf("%d limits (descriptors with limits), want 2", n)
	}
}
