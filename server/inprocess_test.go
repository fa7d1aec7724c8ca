package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

const decideRules = `
domain: d
descriptors:
  - key: a
    rate_limits:
      - {unit: minute, requests_per_unit: 2, algorithm: fixed_window}
      - {unit: hour, requests_per_unit: 10, algorithm: fixed_window}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window}
  - key: free
    rate_limit: {unlimited: true}
`

// TestDecideInProcess: Decide answers as ShouldRateLimit does, with one verdict per
// descriptor: the binding rule, the decision, and whether it denies (never in shadow mode).
func TestDecideInProcess(t *testing.T) {
	h := start(t, decideRules)
	req := &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{
		desc("a", "1"), desc("shadow", "1"), desc("free", "1"), desc("nothing", "1")}}
	for i, wantDenied := range []bool{false, false, true} {
		vs, err := h.srv.Decide(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) != 4 {
			t.Fatalf("%d verdicts, want 4", len(vs))
		}
		a, shadow, free, nothing := vs[0], vs[1], vs[2], vs[3]
		if !a.Limited || a.Limit == nil || a.Limit.FullKey != "d.a" || a.Denied != wantDenied || a.Decision.Allowed == wantDenied {
			t.Errorf("request %d: a: %+v", i, a)
		}
		if a.Rule.Limit != 2 || a.Decision.Limit != 2 { // the minute rule binds
			t.Errorf("request %d: a: binding rule %v, decision limit %d; want the limit of 2", i, a.Rule, a.Decision.Limit)
		}
		if shadow.Denied || !shadow.Limited || shadow.Decision.Allowed != (i == 0) {
			t.Errorf("request %d: shadow: %+v", i, shadow)
		}
		if free.Limited || free.Limit == nil || !free.Limit.Unlimited || nothing.Limited || nothing.Limit != nil {
			t.Errorf("request %d: free %+v, nothing %+v", i, free, nothing)
		}
	}
	if line := h.metric(t, `sluice_decisions_total{domain="d",result="over_limit",rule="d.a"}`); line == "" {
		t.Error("Decide's denial not counted in the metrics")
	}
	// An unknown domain applies no limit (envoyproxy/ratelimit's behaviour), as over gRPC.
	vs, err := h.srv.Decide(context.Background(), &rlsv3.RateLimitRequest{Domain: "nope", Descriptors: req.Descriptors}, nil)
	if err != nil {
		t.Errorf("unknown domain: %v, want no error", err)
	}
	for i, v := range vs {
		if v.Limited || v.Denied {
			t.Errorf("unknown domain: verdict %d %+v, want no limit applied", i, v)
		}
	}
}

// TestAdminHandler serves the operators' endpoints only, not the rate-limit API.
func TestAdminHandler(t *testing.T) {
	h := start(t, decideRules)
	admin := h.srv.AdminHandler()
	for _, path := range []string{"GET /metrics", "GET /healthz", "GET /readyz", "POST /v1/allow", "POST /json"} {
		method, target, _ := strings.Cut(path, " ")
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
		if api := method == http.MethodPost; api != (rec.Code == http.StatusNotFound) {
			t.Errorf("%s: %d; want 404 for the API only", path, rec.Code)
		}
	}
}
