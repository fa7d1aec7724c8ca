package proxy_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/proxy"
)

// TestHeadersAndDenial: allowed responses carry the limit's headers; the denial is the
// middleware's 429 (httplimit.WriteDenial), and the upstream never sees it.
func TestHeadersAndDenial(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, up, perClient)
	p.clock.Advance(15 * time.Second) // 45 s left in the minute's window
	for i := range 5 {
		resp, _ := get(t, p.base+"/")
		want := map[string]string{
			"RateLimit-Policy":      `"edge.remote_address";q=5;w=60`,
			"RateLimit":             `"edge.remote_address";r=` + strconv.Itoa(4-i) + `;t=45`,
			"X-RateLimit-Limit":     "5",
			"X-RateLimit-Remaining": strconv.Itoa(4 - i),
		}
		for k, v := range want {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("request %d: %s %q, want %q", i, k, got, v)
			}
		}
	}
	resp, body := get(t, p.base+"/")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "45" ||
		resp.Header.Get("Content-Type") != "application/problem+json" || resp.Header.Get("RateLimit") != `"edge.remote_address";r=0;t=45` {
		t.Fatalf("denial: %d %v", resp.StatusCode, resp.Header)
	}
	var problem httplimit.ProblemDetails
	if err := json.Unmarshal([]byte(body), &problem); err != nil {
		t.Fatal(err)
	}
	if problem.Type != httplimit.ProblemQuotaExceeded || len(problem.ViolatedPolicies) != 1 || problem.ViolatedPolicies[0] != "edge.remote_address" {
		t.Errorf("problem %+v", problem)
	}
	if up.hits.Load() != 5 {
		t.Errorf("%d requests reached the upstream, want 5", up.hits.Load())
	}
}

// TestHeaderStyleNone: no rate-limit header, but Retry-After on the 429.
func TestHeaderStyleNone(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, up, perClient, func(c *proxy.Config) { c.HeaderStyle = httplimit.HeadersNone })
	for range 6 {
		resp, _ := get(t, p.base+"/")
		for k := range resp.Header {
			if strings.Contains(strings.ToLower(k), "ratelimit") {
				t.Errorf("%d: header %s with style none", resp.StatusCode, k)
			}
		}
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
}

// TestTrustedProxies: without trusted proxies, X-Forwarded-For cannot change a client's key;
// behind a trusted proxy, the address it appended is the key, and entries a client forged to
// the left of it are never read. IPv6 clients of one /64 share a key.
func TestTrustedProxies(t *testing.T) {
	t.Run("untrusted peer", func(t *testing.T) {
		up := newUpstream(t)
		p := startProxy(t, up, perClient)
		passed := 0
		for i := range 20 {
			n, _ := countPassed(t, p.base+"/", 1, "X-Forwarded-For: 203.0.113."+strconv.Itoa(i))
			passed += n
		}
		if passed != 5 {
			t.Errorf("%d passed with a new forged X-Forwarded-For each time, want the peer's 5", passed)
		}
	})
	t.Run("behind a trusted proxy", func(t *testing.T) {
		up := newUpstream(t)
		p := startProxy(t, up, perClient, func(c *proxy.Config) { c.TrustedProxies = []string{"127.0.0.1"} })
		for _, tc := range []struct {
			name    string
			headers [][]string
			want    int
		}{
			{"two clients", [][]string{{"X-Forwarded-For: 198.51.100.1"}, {"X-Forwarded-For: 198.51.100.2"}}, 10},
			{"forged entries to the left", [][]string{{"X-Forwarded-For: 198.51.100.3"}, {"X-Forwarded-For: 6.6.6.6, 198.51.100.3"}, {"X-Forwarded-For: 7.7.7.7, 198.51.100.3"}}, 5},
			{"Forwarded", [][]string{{`Forwarded: for=198.51.100.4`}, {`Forwarded: for="[2001:db8::1]"`}}, 10},
			{"one IPv6 /64", [][]string{{"X-Forwarded-For: 2001:db8:0:1::1"}, {"X-Forwarded-For: 2001:db8:0:1::2"}}, 5},
		} {
			passed := 0
			for range 4 {
				for _, h := range tc.headers {
					n, _ := countPassed(t, p.base+"/", 2, h...)
					passed += n
				}
			}
			if passed != tc.want {
				t.Errorf("%s: %d passed, want %d", tc.name, passed, tc.want)
			}
		}
	})
}

// TestShadowModeNeverDenies: a shadow-mode limit is decided and counted, never denies, and
// is left out of the headers.
func TestShadowModeNeverDenies(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, up, `
domain: edge
descriptors:
  - key: generic_key
    value: all
    rate_limit: {unit: minute, requests_per_unit: 100, name: everyone}
  - key: method
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, name: tuning}
proxy:
  rate_limits:
    - actions: [{generic_key: {descriptor_value: all}}]
    - actions: [{method: {}}]
`)
	for i := range 3 {
		resp, body := get(t, p.base+"/")
		if resp.StatusCode != http.StatusOK || strings.Contains(resp.Header.Get("RateLimit"), "tuning") ||
			resp.Header.Get("RateLimit") != `"everyone";r=`+strconv.Itoa(99-i)+`;t=120` {
			t.Errorf("request %d: %d %q, RateLimit %q", i, resp.StatusCode, body, resp.Header.Get("RateLimit"))
		}
	}
	if _, metrics := get(t, p.admin+"/metrics"); !strings.Contains(metrics, `sluice_shadow_would_deny_total{domain="edge",rule="edge.method"} 2`) {
		t.Error("the shadow limit's would-be denials are not counted")
	}
}
