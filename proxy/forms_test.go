package proxy_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
)

// formStep is one request of a rule-form case and what the proxy must answer.
type formStep struct {
	headers []string // "Name: value"
	status  int
	// policy and rateLimit match the RateLimit-Policy and RateLimit headers (a regexp,
	// anchored); "" is not checked, noHeader wants none.
	policy, rateLimit string
	violated          []string // the 429's violated-policies
	never             bool     // a 429 no wait admits: its problem says never (Retry-After is positive all the same)
}

// formCases are the rule forms the config accepts (issue 23 item 2), each through the proxy.
var formCases = []struct {
	name, rules string
	steps       []formStep
}{{
	name: "block",
	rules: `
descriptors:
  - key: generic_key
    value: all
    rate_limit: {unit: minute, requests_per_unit: 0, name: closed}
proxy:
  rate_limits: [{actions: [{generic_key: {descriptor_value: all}}]}]
`,
	steps: []formStep{
		{status: 429, policy: `"closed";q=0;w=60`, rateLimit: `"closed";r=0;t=\d+`, violated: []string{"closed"}, never: true},
		{status: 429, policy: `"closed";q=0;w=60`, rateLimit: `"closed";r=0;t=\d+`, violated: []string{"closed"}, never: true},
	},
}, {
	name: "block among several limits",
	rules: `
descriptors:
  - key: generic_key
    value: all
    rate_limits:
      - {unit: minute, requests_per_unit: 5}
      - {unit: hour, requests_per_unit: 0, name: closed}
proxy:
  rate_limits: [{actions: [{generic_key: {descriptor_value: all}}]}]
`,
	steps: []formStep{{status: 429, policy: `"closed";q=0;w=60`, rateLimit: `"closed";r=0;t=\d+`, violated: []string{"closed"}, never: true}},
}, {
	name: "unlimited",
	rules: `
descriptors:
  - key: generic_key
    value: all
    rate_limit: {unlimited: true}
proxy:
  rate_limits: [{actions: [{generic_key: {descriptor_value: all}}]}]
`,
	steps: []formStep{
		{status: 200, policy: noHeader, rateLimit: noHeader},
		{status: 200, policy: noHeader, rateLimit: noHeader},
		{status: 200, policy: noHeader, rateLimit: noHeader},
	},
}, {
	name: "replaces",
	rules: `
descriptors:
  - key: generic_key
    value: all
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window, name: general}
  - key: tier
    value: gold
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: fixed_window, name: gold, replaces: [{name: general}]}
proxy:
  rate_limits:
    - actions: [{generic_key: {descriptor_value: all}}]
    - actions: [{request_headers: {header_name: X-Tier, descriptor_key: tier, skip_if_absent: true}}]
`,
	steps: []formStep{
		{headers: []string{"X-Tier: gold"}, status: 200, policy: `"gold";q=2;w=60`, rateLimit: `"gold";r=1;t=60`},
		{headers: []string{"X-Tier: gold"}, status: 200, policy: `"gold";q=2;w=60`, rateLimit: `"gold";r=0;t=60`},
		{headers: []string{"X-Tier: gold"}, status: 429, policy: `"gold";q=2;w=60`, rateLimit: `"gold";r=0;t=60`, violated: []string{"gold"}},
		{status: 200, policy: `"general";q=1;w=60`, rateLimit: `"general";r=0;t=60`},
		{status: 429, policy: `"general";q=1;w=60`, rateLimit: `"general";r=0;t=60`, violated: []string{"general"}},
	},
}, {
	name: "shadow_mode",
	rules: `
descriptors:
  - key: generic_key
    value: all
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: fixed_window, name: everyone}
  - key: method
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window, name: tuning}
proxy:
  rate_limits:
    - actions: [{generic_key: {descriptor_value: all}}]
    - actions: [{method: {}}]
`,
	steps: []formStep{
		{status: 200, policy: `"everyone";q=10;w=60`, rateLimit: `"everyone";r=9;t=60`},
		{status: 200, policy: `"everyone";q=10;w=60`, rateLimit: `"everyone";r=8;t=60`},
		{status: 200, policy: `"everyone";q=10;w=60`, rateLimit: `"everyone";r=7;t=60`},
	},
}, {
	name: "several rate_limits (the issue's case)",
	rules: `
descriptors:
  - key: generic_key
    value: all
    rate_limits:
      - {period: 60s, requests_per_unit: 100, name: b}
      - {period: 10s, requests_per_unit: 5, name: a}
proxy:
  rate_limits: [{actions: [{generic_key: {descriptor_value: all}}]}]
`,
	steps: []formStep{
		{status: 200, policy: `"b";q=100;w=60, "a";q=5;w=10`, rateLimit: `"b";r=99;t=\d+, "a";r=4;t=\d+`},
		{status: 200, policy: `"b";q=100;w=60, "a";q=5;w=10`, rateLimit: `"b";r=98;t=\d+, "a";r=3;t=\d+`},
		{status: 200, policy: `"b";q=100;w=60, "a";q=5;w=10`, rateLimit: `"b";r=97;t=\d+, "a";r=2;t=\d+`},
		{status: 200, policy: `"b";q=100;w=60, "a";q=5;w=10`, rateLimit: `"b";r=96;t=\d+, "a";r=1;t=\d+`},
		{status: 200, policy: `"b";q=100;w=60, "a";q=5;w=10`, rateLimit: `"b";r=95;t=\d+, "a";r=0;t=\d+`},
		{status: 429, policy: `"b";q=100;w=60, "a";q=5;w=10`, rateLimit: `"b";r=95;t=\d+, "a";r=0;t=\d+`, violated: []string{"a"}},
	},
}, {
	name: "several rate_limits, unnamed, bucket and non-ASCII name",
	rules: `
descriptors:
  - key: generic_key
    value: all
    rate_limits:
      - {period: 1s, requests_per_unit: 1, algorithm: token_bucket, burst: 2}
      - {unit: day, requests_per_unit: 10000, algorithm: fixed_window}
      - {unit: hour, requests_per_unit: 500, algorithm: fixed_window, name: "límite"}
proxy:
  rate_limits: [{actions: [{generic_key: {descriptor_value: all}}]}]
`,
	steps: []formStep{
		{status: 200, policy: `"edge.generic_key_all";q=2;w=2, "edge.generic_key_all\[1\]";q=10000;w=86400, "l__mite";q=500;w=3600`,
			rateLimit: `"edge.generic_key_all";r=1;t=1, "edge.generic_key_all\[1\]";r=9999;t=86400, "l__mite";r=499;t=3600`},
		{status: 200, policy: `"edge.generic_key_all";q=2;w=2, .*`, rateLimit: `"edge.generic_key_all";r=0;t=2, "edge.generic_key_all\[1\]";r=9998;t=86400, "l__mite";r=498;t=3600`},
		{status: 429, policy: `"edge.generic_key_all";q=2;w=2, .*`, rateLimit: `"edge.generic_key_all";r=0;t=1, "edge.generic_key_all\[1\]";r=9998;t=86400, "l__mite";r=498;t=3600`,
			violated: []string{"edge.generic_key_all"}},
	},
}, {
	name: "quota_mode",
	rules: `
descriptors:
  - key: generic_key
    value: all
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window, name: q1}
  - key: method
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: fixed_window, name: q2}
proxy:
  rate_limits:
    - actions: [{generic_key: {descriptor_value: all}}]
    - actions: [{method: {}}]
`,
	steps: []formStep{
		{status: 200, policy: `"q1";q=1;w=60, "q2";q=2;w=60`, rateLimit: `"q1";r=0;t=60, "q2";r=1;t=60`},
		// q1 is over its quota but q2 is not: quota mode admits.
		{status: 200, policy: `"q1";q=1;w=60, "q2";q=2;w=60`, rateLimit: `"q1";r=0;t=60, "q2";r=0;t=60`},
		{status: 429, policy: `"q1";q=1;w=60, "q2";q=2;w=60`, rateLimit: `"q1";r=0;t=60, "q2";r=0;t=60`, violated: []string{"q1", "q2"}},
	},
}, {
	name: "quota_mode beside a limit",
	rules: `
descriptors:
  - key: generic_key
    value: all
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: fixed_window, name: plain}
  - key: method
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window, name: q1}
  - key: path
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: fixed_window, name: q2}
proxy:
  rate_limits:
    - actions: [{generic_key: {descriptor_value: all}}]
    - actions: [{method: {}}]
    - actions: [{path: {}}]
`,
	steps: []formStep{
		{status: 200, rateLimit: `"plain";r=1;t=60, "q1";r=0;t=60, "q2";r=4;t=60`},
		{status: 200, rateLimit: `"plain";r=0;t=60, "q1";r=0;t=60, "q2";r=3;t=60`},
		// The plain limit denies; q1 is over its quota too, but q2 is not, so q1 did not deny.
		{status: 429, rateLimit: `"plain";r=0;t=60, "q1";r=0;t=60, "q2";r=\d;t=60`, violated: []string{"plain"}},
	},
}}

// TestRuleForms: every rule form the config accepts goes through a real proxy over an
// upstream: status, RateLimit headers, Retry-After and the problem body (issue 23 items 2, 3).
func TestRuleForms(t *testing.T) {
	for _, tc := range formCases {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t)
			p := startProxy(t, up, "domain: edge\n"+tc.rules)
			forwarded := 0
			for i, st := range tc.steps {
				resp, body := get(t, p.base+"/", st.headers...)
				if resp.StatusCode != st.status {
					t.Fatalf("request %d: status %d, want %d: %s", i, resp.StatusCode, st.status, body)
				}
				checkHeader(t, i, resp, "RateLimit-Policy", st.policy)
				checkHeader(t, i, resp, "RateLimit", st.rateLimit)
				if st.status == http.StatusOK {
					forwarded++
					continue
				}
				var problem httplimit.ProblemDetails
				if err := json.Unmarshal([]byte(body), &problem); err != nil {
					t.Fatalf("request %d: %v in %q", i, err, body)
				}
				if !slices.Equal(problem.ViolatedPolicies, st.violated) || problem.Type != httplimit.ProblemQuotaExceeded {
					t.Errorf("request %d: problem %+v, want violated %q", i, problem, st.violated)
				}
				// Retry-After is always positive (issue 30: a client told 0 retries at once); the
				// body says when waiting will not help.
				if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 ||
					strings.Contains(problem.Detail, "never") != st.never {
					t.Errorf("request %d: Retry-After %q, detail %q; want a positive Retry-After, never %v", i, resp.Header.Get("Retry-After"), problem.Detail, st.never)
				}
			}
			if got := int(up.hits.Load()); got != forwarded {
				t.Errorf("the upstream saw %d requests, want the %d forwarded", got, forwarded)
			}
		})
	}
}

// noHeader is the pattern of a header that must be absent.
const noHeader = "(absent)"

// checkHeader checks a response header against an anchored regexp; "" checks nothing,
// noHeader wants no header.
func checkHeader(t *testing.T, i int, resp *http.Response, name, pattern string) {
	t.Helper()
	got, ok := resp.Header[http.CanonicalHeaderKey(name)]
	switch pattern {
	case "":
		return
	case noHeader:
		if ok {
			t.Errorf("request %d: %s %q, want none", i, name, got)
		}
		return
	}
	if len(got) != 1 || !regexp.MustCompile("^(?:"+pattern+")$").MatchString(got[0]) {
		t.Errorf("request %d: %s %q, want %s", i, name, got, pattern)
	}
}
