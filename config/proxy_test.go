package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// TestProxyFixtures loads each file of testdata/proxy: one problem per file, named with its
// file, line and field.
func TestProxyFixtures(t *testing.T) {
	want := map[string][]string{
		"unknown_action.yaml":         {"unknown_action.yaml:8:", `unknown field "destination_cluster"`},
		"two_kinds.yaml":              {"two_kinds.yaml:8: proxy.rate_limits[0].actions[0]: want exactly one of", "got 2"},
		"no_rate_limits.yaml":         {"no_rate_limits.yaml:6: proxy.rate_limits: empty"},
		"no_actions.yaml":             {"no_actions.yaml:7: proxy.rate_limits[0].actions: empty"},
		"bad_regex.yaml":              {"bad_regex.yaml:11: proxy.rate_limits[0].actions[0].header_value_match.headers[0].safe_regex_match.regex:", "missing closing )"},
		"bad_header_name.yaml":        {"bad_header_name.yaml:8: proxy.rate_limits[0].actions[0].request_headers.header_name:", `"X Api Key" is not a header name`},
		"unknown_pseudo_header.yaml":  {"unknown_pseudo_header.yaml:8: proxy.rate_limits[0].actions[0].request_headers.header_name: unknown pseudo-header \":host\""},
		"missing_descriptor_key.yaml": {"missing_descriptor_key.yaml:8: proxy.rate_limits[0].actions[0].request_headers.descriptor_key: empty"},
		"bad_prefix.yaml":             {"bad_prefix.yaml:8: proxy.rate_limits[0].actions[0].path.prefixes[1]: must start with /"},
		"bad_ipv6_prefix.yaml":        {"bad_ipv6_prefix.yaml:8: proxy.rate_limits[0].actions[0].remote_address.ipv6_prefix: must be between 1 and 128"},
		"generic_without_value.yaml":  {"generic_without_value.yaml:8: proxy.rate_limits[0].actions[0].generic_key.descriptor_value: empty"},
		"matcher_two_ways.yaml":       {"matcher_two_ways.yaml:11: proxy.rate_limits[0].actions[0].header_value_match.headers[0]: want exactly one of", "got 2"},
		"unknown_matcher_field.yaml":  {"unknown_matcher_field.yaml:11:", `unknown field "string_match"`},
	}
	for base, err := range loadFixtures(t, "testdata/proxy", want) {
		if !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s: error does not wrap ErrInvalid: %v", base, err)
		}
		if n := strings.Count(err.Error(), base+":"); n != 1 {
			t.Errorf("%s: %d problems, want 1: %v", base, n, err)
		}
	}
}

const proxyRules = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 10}
proxy:
  rate_limits:
    - actions:
        - remote_address:
        - method:
        - path: {prefixes: [/, /api/, /api/v2/]}
        - generic_key: {descriptor_value: all}
        - request_headers: {header_name: X-Api-Key, descriptor_key: api_key, skip_if_absent: true}
        - header_value_match:
            descriptor_value: bot
            expect_match: false
            headers:
              - {name: User-Agent, safe_regex_match: {regex: "Mozilla/.*"}}
              - {name: X-Trace, present_match: false}
`

func TestProxySection(t *testing.T) {
	c := mustCompile(t, proxyRules)
	rls := c.Domain("edge").Proxy
	if len(rls) != 1 || len(rls[0].Actions) != 6 {
		t.Fatalf("proxy rate limits: %+v", rls)
	}
	var keys []string
	for _, a := range rls[0].Actions {
		keys = append(keys, a.Key())
	}
	if got := strings.Join(keys, ","); got != "remote_address,method,path,generic_key,api_key,header_match" {
		t.Errorf("keys %s", got)
	}
	path := rls[0].Actions[2].Path
	for p, want := range map[string]string{"/api/v2/x": "/api/v2/", "/api/v1": "/api/", "/apix": "/", "/": "/"} {
		if got, ok := path.Route(p); !ok || got != want {
			t.Errorf("Route(%q) = %q, %v; want %q", p, got, ok, want)
		}
	}
	hv := rls[0].Actions[5].HeaderValueMatch
	headers := func(h map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) { v, ok := h[name]; return v, ok }
	}
	// expect_match false: the entry is appended when the headers do not all match.
	for _, tc := range []struct {
		h    map[string]string
		want bool
	}{
		{map[string]string{"User-Agent": "Mozilla/5.0"}, false},
		{map[string]string{"User-Agent": "curl/8"}, true},
		{map[string]string{"User-Agent": "xMozilla/5.0"}, true}, // the regex matches the whole value
		{map[string]string{"User-Agent": "Mozilla/5.0", "X-Trace": "1"}, true},
		{map[string]string{}, true},
	} {
		if got := hv.Matches(headers(tc.h)); got != tc.want {
			t.Errorf("Matches(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
	if d := config.Lookup(c.Domain("edge"), []entry{{"remote_address", "10.0.0.1"}}); d == nil {
		t.Error("descriptors of a document with a proxy section do not match")
	}
	if c := mustCompile(t, envoyRules); c.Domain("mongo_cps").Proxy != nil {
		t.Error("a document without a proxy section has proxy rate limits")
	}
}

func TestHeaderMatcherInvert(t *testing.T) {
	s := "abc"
	h := config.HeaderMatcher{Name: "X", ContainsMatch: &s, InvertMatch: true}
	for _, tc := range []struct {
		v       string
		present bool
		want    bool
	}{{"xabcx", true, false}, {"xyz", true, true}, {"", false, true}} {
		if got := h.Matches(tc.v, tc.present); got != tc.want {
			t.Errorf("Matches(%q, %v) = %v, want %v", tc.v, tc.present, got, tc.want)
		}
	}
}

// TestProxyBudgetFixtures loads each file of testdata/budgets (config.ProxyBudget): one
// problem per file, named with its file, line and field.
func TestProxyBudgetFixtures(t *testing.T) {
	want := map[string][]string{
		"no_name.yaml":           {"no_name.yaml:9: proxy.budgets[0].name: empty"},
		"duplicate_name.yaml":    {"duplicate_name.yaml:11: proxy.budgets[1].name:", "names another budget"},
		"zero_limit.yaml":        {"zero_limit.yaml:9: proxy.budgets[0].rate_limit.requests_per_unit: a budget needs a positive limit"},
		"bad_mode.yaml":          {"bad_mode.yaml:9: proxy.budgets[0].mode: want bounded or strict"},
		"bad_ttl.yaml":           {"bad_ttl.yaml:9: proxy.budgets[0].ttl: not a duration"},
		"ttl_past_period.yaml":   {"ttl_past_period.yaml:9: proxy.budgets[0].ttl: must be between 1ms and the period 1m0s, got 2m0s"},
		"bad_on_expiry.yaml":     {"bad_on_expiry.yaml:9: proxy.budgets[0].on_expiry: want charge or free"},
		"bad_usage.yaml":         {"bad_usage.yaml:9: proxy.budgets[0].usage: want openai or anthropic"},
		"missing_prices.yaml":    {"missing_prices.yaml:9: proxy.budgets[0].prices:", "no such file"},
		"bad_prices.yaml":        {"bad_prices.yaml:9: proxy.budgets[0].prices: budget: price table: models.gpt-4o.input: must be between 0 and"},
		"negative_estimate.yaml": {"negative_estimate.yaml:9: proxy.budgets[0].estimate:", "must not be negative"},
		"negative_max_body.yaml": {"negative_max_body.yaml:9: proxy.budgets[0].max_body: must not be negative"},
		"unknown_field.yaml":     {"unknown_field.yaml:11: proxy.budgets[0]: unknown field \"limit\""},
		"bad_action.yaml":        {"bad_action.yaml:10: proxy.budgets[0].actions[0].request_headers.header_name:", "is not a header name"},
	}
	for base, err := range loadFixtures(t, "testdata/budgets", want) {
		if !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s: error does not wrap ErrInvalid: %v", base, err)
		}
		if n := strings.Count(err.Error(), base+":"); n != 1 {
			t.Errorf("%s: %d problems, want 1: %v", base, n, err)
		}
	}
}
