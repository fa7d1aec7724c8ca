package gate

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
)

const actionRules = `
domain: d
descriptors:
  - key: x
    rate_limit: {unit: second, requests_per_unit: 1}
proxy:
  rate_limits:
    - actions: [{remote_address: {}}]
    - actions: [{remote_address: {ipv6_prefix: 128}}]
    - actions: [{method: {}}, {path: {}}]
    - actions: [{path: {descriptor_key: route, prefixes: [/api/, /api/v2/]}}]
    - actions: [{generic_key: {descriptor_value: all}}]
    - actions:
        - request_headers: {header_name: X-Api-Key, descriptor_key: api_key}
        - request_headers: {header_name: X-Tenant, descriptor_key: tenant, skip_if_absent: true}
    - actions:
        - request_headers: {header_name: ":authority", descriptor_key: host}
        - request_headers: {header_name: ":path", descriptor_key: uri}
    - actions:
        - header_value_match:
            descriptor_value: write
            headers: [{name: ":method", safe_regex_match: {regex: "POST|PUT|DELETE"}}]
`

// TestActions builds the descriptors of requests and checks each action's entry, and that
// a rate limit whose action cannot append produces no descriptor.
func TestActions(t *testing.T) {
	cfg, err := config.LoadFS(fstest.MapFS{"rules.yaml": {Data: []byte(actionRules)}}, "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resolver, err := clientip.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{resolver: resolver}
	build := func(r *http.Request) string {
		sc := Get()
		defer sc.Release()
		sc.Request.Of(r)
		g.descriptors(sc, cfg.Domain("d"))
		var out []string
		for _, d := range sc.req.Descriptors {
			var es []string
			for _, e := range d.Entries {
				es = append(es, e.Key+"="+e.Value)
			}
			out = append(out, strings.Join(es, ","))
		}
		return strings.Join(out, " | ")
	}
	for _, tc := range []struct {
		name    string
		method  string
		target  string
		remote  string
		headers map[string]string
		want    string
	}{
		{"get", "GET", "/a//b/../c?q=1", "192.0.2.1:5000", nil,
			"remote_address=192.0.2.1 | remote_address=192.0.2.1 | method=GET,path=/a/c | generic_key=all | host=example.com,uri=/a//b/../c?q=1"},
		{"route and headers", "POST", "/api/v2/users", "[2001:db8:1:2:3:4:5:6]:5000", map[string]string{"X-Api-Key": "k1", "X-Tenant": "t1"},
			"remote_address=2001:db8:1:2::/64 | remote_address=2001:db8:1:2:3:4:5:6 | method=POST,path=/api/v2/users | route=/api/v2/ | generic_key=all | api_key=k1,tenant=t1 | host=example.com,uri=/api/v2/users | header_match=write"},
		{"skip if absent", "DELETE", "/api/x", "192.0.2.1:5000", map[string]string{"X-Api-Key": "k1"},
			"remote_address=192.0.2.1 | remote_address=192.0.2.1 | method=DELETE,path=/api/x | route=/api/ | generic_key=all | api_key=k1 | host=example.com,uri=/api/x | header_match=write"},
	} {
		r := httptest.NewRequest(tc.method, "http://example.com"+tc.target, nil)
		r.RemoteAddr = tc.remote
		for k, v := range tc.headers {
			r.Header.Set(k, v)
		}
		if got := build(r); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
