package httplimit

import (
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func TestSetHeadersIETF(t *testing.T) {
	for _, tc := range []struct {
		name       string
		results    []Result
		policy, rl string
	}{{
		name:    "one policy",
		results: []Result{{Name: "default", Rule: sluice.PerMinute(100), Decision: sluice.Decision{Allowed: true, Capacity: 100, Remaining: 50, ResetAfter: 30 * time.Second}}},
		policy:  `"default";q=100;w=60`, rl: `"default";r=50;t=30`,
	}, {
		name:    "remaining 0, reset rounded up",
		results: []Result{{Name: "a", Rule: sluice.FixedWindow(10, time.Second), Decision: sluice.Decision{Allowed: true, Capacity: 10, Remaining: 0, ResetAfter: time.Nanosecond}}},
		policy:  `"a";q=10;w=1`, rl: `"a";r=0;t=1`,
	}, {
		name:    "whole second not rounded",
		results: []Result{{Name: "a", Rule: sluice.FixedWindow(10, time.Second), Decision: sluice.Decision{Allowed: true, Capacity: 10, Remaining: 3, ResetAfter: 2 * time.Second}}},
		policy:  `"a";q=10;w=1`, rl: `"a";r=3;t=2`,
	}, {
		name:    "denied: t is the retry, not the full reset",
		results: []Result{{Name: "a", Rule: sluice.PerMinute(10), Decision: sluice.Decision{Capacity: 10, RetryAfter: 1200 * time.Millisecond, ResetAfter: 59 * time.Second}}},
		policy:  `"a";q=10;w=60`, rl: `"a";r=0;t=2`,
	}, {
		name:    "debt shows as 0 remaining; sub-second window is 1",
		results: []Result{{Name: "a", Rule: sluice.FixedWindow(5, 100*time.Millisecond), Decision: sluice.Decision{Allowed: true, Capacity: 5, Remaining: -3}}},
		policy:  `"a";q=5;w=1`, rl: `"a";r=0;t=0`,
	}, {
		name: "several policies, one item each",
		results: []Result{
			{Name: "burst", Rule: sluice.PerMinute(100), Decision: sluice.Decision{Allowed: true, Capacity: 100, Remaining: 99, ResetAfter: time.Second}},
			{Name: "daily", Rule: sluice.FixedWindow(1000, 24*time.Hour), Decision: sluice.Decision{Allowed: true, Capacity: 1000, Remaining: 10, ResetAfter: 3 * time.Hour}},
		},
		policy: `"burst";q=100;w=60, "daily";q=1000;w=86400`, rl: `"burst";r=99;t=1, "daily";r=10;t=10800`,
	}, {
		name:    "bucket: quota is the burst, window the time to grant it",
		results: []Result{{Name: "tb", Rule: sluice.TokenBucket(10, time.Second, 50), Decision: sluice.Decision{Allowed: true, Capacity: 50, Remaining: 49, ResetAfter: 100 * time.Millisecond}}},
		policy:  `"tb";q=50;w=5`, rl: `"tb";r=49;t=1`,
	}, {
		name:    "names quoted and escaped",
		results: []Result{{Name: "a\"b\\c\né", Rule: sluice.PerSecond(1), Decision: sluice.Decision{Allowed: true, Capacity: 1}}, {Rule: sluice.PerSecond(1), Decision: sluice.Decision{Allowed: true, Capacity: 1}}},
		policy:  `"a\"b\\c___";q=1;w=1, "default";q=1;w=1`, rl: `"a\"b\\c___";r=0;t=0, "default";r=0;t=0`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			setHeaders(h, HeadersIETF, tc.results, nil, t0.UnixNano())
			if got := h.Get("RateLimit-Policy"); got != tc.policy {
				t.Errorf("RateLimit-Policy = %s, want %s", got, tc.policy)
			}
			if got := h.Get("RateLimit"); got != tc.rl {
				t.Errorf("RateLimit = %s, want %s", got, tc.rl)
			}
			if h.Get("X-RateLimit-Limit") != "" {
				t.Errorf("HeadersIETF wrote X-RateLimit-Limit")
			}
			// The precomputed policy gives the same header.
			h2 := http.Header{}
			setHeaders(h2, HeadersIETF, tc.results, policyValue(tc.results), t0.UnixNano())
			if h2.Get("RateLimit-Policy") != tc.policy || h2.Get("RateLimit") != tc.rl {
				t.Errorf("with a precomputed policy: %v", h2)
			}
		})
	}
}

func TestSetHeadersX(t *testing.T) {
	now := t0.Add(250 * time.Millisecond)
	results := []Result{
		{Name: "minute", Rule: sluice.PerMinute(100), Decision: sluice.Decision{Allowed: true, Capacity: 100, Remaining: 7, ResetAfter: 40 * time.Second}},
		{Name: "second", Rule: sluice.PerSecond(10), Decision: sluice.Decision{Allowed: true, Capacity: 10, Remaining: 2, ResetAfter: 500 * time.Millisecond}},
		{Name: "hour", Rule: sluice.PerHour(1000), Decision: sluice.Decision{Allowed: true, Capacity: 1000, Remaining: 2, ResetAfter: time.Hour}},
	}
	h := http.Header{}
	setHeaders(h, HeadersX, results, nil, now.UnixNano())
	// Least remaining wins; the tie between "second" and "hour" goes to the later reset.
	want := map[string]string{
		"X-RateLimit-Limit":     "1000",
		"X-RateLimit-Remaining": "2",
		"X-RateLimit-Reset":     strconv.FormatInt(t0.Unix()+3601, 10), // 12:00:00.25 + 1h, rounded up
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if h.Get("RateLimit") != "" || h.Get("RateLimit-Policy") != "" {
		t.Errorf("HeadersX wrote IETF fields: %v", h)
	}
}

func TestSetHeadersStyles(t *testing.T) {
	results := []Result{{Name: "a", Rule: sluice.PerSecond(5), Decision: sluice.Decision{Allowed: true, Capacity: 5, Remaining: 4, ResetAfter: time.Second}}}
	for style, want := range map[HeaderStyle]int{HeadersBoth: 5, HeadersIETF: 2, HeadersX: 3, HeadersNone: 0} {
		h := http.Header{"Ratelimit": {"stale"}}
		SetHeaders(h, style, results)
		got := len(h)
		if style == HeadersNone || style == HeadersX {
			got-- // the stale RateLimit stays
		}
		if got != want {
			t.Errorf("%v: %d headers, want %d: %v", style, got, want, h)
		}
		if style != HeadersNone && style != HeadersX && h.Get("RateLimit") == "stale" {
			t.Errorf("%v: RateLimit not replaced", style)
		}
		if style == HeadersBoth || style == HeadersX {
			reset, _ := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
			if now := time.Now().Unix(); reset < now+1 || reset > now+2 {
				t.Errorf("%v: X-RateLimit-Reset %d, want about %d", style, reset, now+1)
			}
		}
	}
	h := http.Header{}
	SetHeaders(h, HeadersBoth, nil)
	if len(h) != 0 {
		t.Errorf("no results wrote %v", h)
	}
}

func TestHeaderStyleNames(t *testing.T) {
	for s := HeadersBoth; s <= HeadersOnDenial; s++ {
		got, err := ParseHeaderStyle(s.String())
		if err != nil || got != s {
			t.Errorf("ParseHeaderStyle(%q) = %v, %v", s, got, err)
		}
	}
	_, err := ParseHeaderStyle("X")
	var fe *sluice.FieldError
	if !errors.As(err, &fe) || fe.Field != "header_style" {
		t.Errorf("ParseHeaderStyle(X) = %v", err)
	}
}

func TestSetHeadersAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	results := []Result{
		{Name: "a", Rule: sluice.PerSecond(5), Decision: sluice.Decision{Allowed: true, Capacity: 5, Remaining: 4, ResetAfter: time.Second}},
		{Name: "b", Rule: sluice.PerMinute(50), Decision: sluice.Decision{Allowed: true, Capacity: 50, Remaining: 40, ResetAfter: time.Minute}},
	}
	policy := policyValue(results)
	h := http.Header{}
	allocs := testing.AllocsPerRun(100, func() { setHeaders(h, HeadersBoth, results, policy, t0.UnixNano()) })
	if allocs > 2 {
		t.Errorf("setHeaders allocates %v times, want at most 2 (one string, one slice)", allocs)
	}
}

// HeadersOnDenial writes the X-RateLimit-* fields of a denial, and nothing for an admission.
func TestHeadersOnDenial(t *testing.T) {
	allowed := []Result{{Name: "a", Rule: sluice.PerMinute(5), Decision: sluice.Decision{Allowed: true, Capacity: 5, Remaining: 4, ResetAfter: time.Minute}}}
	h := http.Header{}
	SetHeaders(h, HeadersOnDenial, allowed)
	if len(h) != 0 {
		t.Errorf("an admission wrote %v", h)
	}
	denied := append(allowed, Result{Name: "b", Rule: sluice.PerMinute(1), Decision: sluice.Decision{Capacity: 1, RetryAfter: time.Second, ResetAfter: time.Minute}})
	SetHeaders(h, HeadersOnDenial, denied)
	x := http.Header{}
	SetHeaders(x, HeadersX, denied)
	delete(h, headerXReset) // the time of day
	delete(x, headerXReset)
	if len(h) != 2 || !reflect.DeepEqual(h, x) {
		t.Errorf("a denial wrote %v, want %v", h, x)
	}
}
