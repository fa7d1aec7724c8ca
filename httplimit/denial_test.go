package httplimit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestWriteDenial(t *testing.T) {
	for _, tc := range []struct {
		name       string
		results    []Result
		retryAfter string
		violated   []string
		detail     string
	}{{
		name:       "rounded up",
		results:    []Result{{Name: "a", Decision: sluice.Decision{Capacity: 5, RetryAfter: 1200 * time.Millisecond}}},
		retryAfter: "2", violated: []string{"a"}, detail: "Retry-After",
	}, {
		name:       "under a second is 1",
		results:    []Result{{Name: "a", Decision: sluice.Decision{Capacity: 5, RetryAfter: time.Millisecond}}},
		retryAfter: "1", violated: []string{"a"},
	}, {
		name:       "exact second",
		results:    []Result{{Name: "a", Decision: sluice.Decision{Capacity: 5, RetryAfter: 3 * time.Second}}},
		retryAfter: "3", violated: []string{"a"},
	}, {
		name: "longest wait of the denying policies; allowed ones not listed",
		results: []Result{
			{Name: "ok", Decision: sluice.Decision{Allowed: true, Capacity: 5, Remaining: 4, ResetAfter: time.Hour}},
			{Name: "second", Decision: sluice.Decision{Capacity: 5, RetryAfter: 400 * time.Millisecond}},
			{Name: "minute", Decision: sluice.Decision{Capacity: 5, RetryAfter: 30*time.Second + 1}},
		},
		retryAfter: "31", violated: []string{"second", "minute"},
	}, {
		name: "never: until the state is empty",
		results: []Result{{Name: "big", Rule: sluice.FixedWindow(5, time.Minute),
			Decision: sluice.Decision{Capacity: 5, RetryAfter: sluice.Never, ResetAfter: 20*time.Second + 1}}},
		retryAfter: "21", violated: []string{"big"}, detail: "never be allowed",
	}, {
		name: "never on an empty state: the period, not 0 (issue 30)",
		results: []Result{{Name: "big", Rule: sluice.FixedWindow(5, time.Minute),
			Decision: sluice.Decision{Capacity: 5, Remaining: 5, RetryAfter: sluice.Never}}},
		retryAfter: "60", violated: []string{"big"}, detail: "never be allowed",
	}, {
		name: "a retry and a never: never, the longest wait",
		results: []Result{{Name: "a", Decision: sluice.Decision{Capacity: 5, RetryAfter: time.Second}},
			{Name: "b", Rule: sluice.FixedWindow(5, 10*time.Second), Decision: sluice.Decision{Capacity: 5, RetryAfter: sluice.Never}}},
		retryAfter: "10", violated: []string{"a", "b"}, detail: "never be allowed",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteDenial(rec, httptest.NewRequest("GET", "/x", nil), tc.results)
			res := rec.Result()
			if res.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("status %d", res.StatusCode)
			}
			if got := res.Header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tc.retryAfter)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var p map[string]any
			if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
				t.Fatal(err)
			}
			if p["type"] != ProblemQuotaExceeded || p["status"] != float64(429) || p["title"] == "" {
				t.Errorf("body %v", p)
			}
			var violated []string
			for _, v := range p["violated-policies"].([]any) {
				violated = append(violated, v.(string))
			}
			if !reflect.DeepEqual(violated, tc.violated) {
				t.Errorf("violated-policies = %v, want %v", violated, tc.violated)
			}
			if !strings.Contains(p["detail"].(string), tc.detail) {
				t.Errorf("detail %q does not say %q", p["detail"], tc.detail)
			}
		})
	}
}

func TestProblemJSON(t *testing.T) {
	p := ProblemDetails{Type: "about:blank", Title: "t\"i\\t\nle\x01 é \xff", Status: 503, Instance: "/x",
		ViolatedPolicies: []string{"a\"b", "ü"}}
	var got ProblemDetails
	if err := json.Unmarshal(appendProblem(nil, &p), &got); err != nil {
		t.Fatalf("%s: %v", appendProblem(nil, &p), err)
	}
	want := p
	want.Title = "t\"i\\t\nle\x01 é \ufffd"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip %+v, want %+v", got, want)
	}
	var m map[string]any
	_ = json.Unmarshal(appendProblem(nil, &ProblemDetails{Type: "x", Status: 429}), &m)
	if _, ok := m["detail"]; ok || m["violated-policies"] == nil {
		t.Errorf("empty detail written, or violated-policies missing: %v", m)
	}
}
