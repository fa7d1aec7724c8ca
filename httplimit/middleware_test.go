package httplimit

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

func TestNothingToDoReturnsTheHandler(t *testing.T) {
	l := backends[0].open(t, sluice.SystemClock{})
	var h http.Handler = okHandler
	for _, mw := range []func(http.Handler) http.Handler{
		Middleware(l),
		Middleware(nil, WithLogger(quietLogger())),
		Middleware(nil, WithLimits(Limit{Name: "a", Rule: sluice.PerSecond(1)}), WithLogger(quietLogger())),
	} {
		if got := mw(h); reflect.ValueOf(got).Pointer() != reflect.ValueOf(h).Pointer() {
			t.Errorf("middleware with nothing to do wrapped the handler: %T", got)
		}
	}
}

func TestNewRejectsBadPolicies(t *testing.T) {
	l := backends[0].open(t, sluice.SystemClock{})
	good := Limit{Name: "good", Rule: sluice.PerSecond(1)}
	for _, tc := range []struct {
		policy Limit
		field  string
	}{
		{Limit{Rule: sluice.PerSecond(1)}, "name"},
		{Limit{Name: "a:b", Rule: sluice.PerSecond(1)}, "name"},
		{Limit{Name: `a"b`, Rule: sluice.PerSecond(1)}, "name"},
		{Limit{Name: "good", Rule: sluice.PerSecond(1)}, "name"},
		{Limit{Name: "r", Rule: sluice.Rule{}}, "algorithm"},
		{Limit{Name: "r", Rule: sluice.PerSecond(0)}, "limit"},
		{Limit{Name: "k", Rule: sluice.PerSecond(1), Key: KeyHeader("")}, "key"},
		{Limit{Name: "k", Rule: sluice.PerSecond(1), Key: KeyFunc(nil)}, "key"},
	} {
		_, err := New(l, WithLimits(good, tc.policy))
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("New(%+v) = %v, want a FieldError on %q", tc.policy.Name, err, tc.field)
		}
	}
	// Middleware logs the error and enforces the good policies.
	var buf testenv.LogBuffer
	h := Middleware(l, WithLimits(good, Limit{Name: "bad"}), WithLogger(logged(&buf)))(okHandler)
	if got := statuses(h, 2, "/", nil); !reflect.DeepEqual(got, codes(ok, deny)) {
		t.Errorf("good policy not enforced next to a bad one: %v", got)
	}
	if recs := buf.Records(t, "httplimit: configuration error"); len(recs) != 1 || !contains(recs[0]["err"].(string), "policies[1]") {
		t.Errorf("configuration error log: %v", recs)
	}
}

func TestPoliciesPerRouteAndMethod(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, _ *sluicetest.ManualClock) {
		mw := mustNew(t, l, WithLimits(
			Limit{Name: "writes", Rule: sluice.FixedWindow(1, time.Hour), Methods: []string{http.MethodPost}},
			Limit{Name: "search", Rule: sluice.FixedWindow(2, time.Hour), Routes: []string{"GET /search"}},
		))
		mux := http.NewServeMux()
		mux.Handle("GET /search", mw(okHandler))
		mux.Handle("/items", mw(okHandler))
		post := func(r *http.Request) { r.Method = http.MethodPost }
		if got, want := statuses(mux, 2, "/items", post), codes(ok, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("POST /items: %v, want %v", got, want)
		}
		if got := statuses(mux, 3, "/items", nil); !reflect.DeepEqual(got, codes(ok, ok, ok)) {
			t.Errorf("GET /items matches no policy: %v", got)
		}
		if got, want := statuses(mux, 3, "/search", nil), codes(ok, ok, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("GET /search: %v, want %v", got, want)
		}
	})
}

// TestSeveralPolicies: a request passes only if every policy allows it, and a denied request
// consumes from none.
func TestSeveralPolicies(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, clock *sluicetest.ManualClock) {
		h := mustNew(t, l, WithLimits(
			Limit{Name: "second", Rule: sluice.FixedWindow(2, time.Second)},
			Limit{Name: "hour", Rule: sluice.FixedWindow(5, time.Hour)},
		))(okHandler)
		a := from("192.0.2.1:1")
		if got, want := statuses(h, 3, "/", a), codes(ok, ok, deny); !reflect.DeepEqual(got, want) {
			t.Fatalf("%v, want %v", got, want)
		}
		w := get(h, "/", a)
		if got := w.Header().Get("RateLimit"); got != `"second";r=0;t=1, "hour";r=3;t=3600` {
			t.Errorf("RateLimit after denials = %s: the denied requests consumed from the hour", got)
		}
		clock.Advance(time.Second)
		if got, want := statuses(h, 4, "/", a), codes(ok, ok, deny, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("next second: %v, want %v", got, want)
		}
		clock.Advance(time.Second)
		if got, want := statuses(h, 3, "/", a), codes(ok, deny, deny); !reflect.DeepEqual(got, want) {
			t.Errorf("third second (hour has 1 left): %v, want %v", got, want)
		}
		w = get(h, "/", a)
		var p ProblemDetails
		_ = json.Unmarshal(w.Body.Bytes(), &p)
		if !reflect.DeepEqual(p.ViolatedPolicies, []string{"hour"}) {
			t.Errorf("violated-policies %v, want [hour]", p.ViolatedPolicies)
		}
	})
}

func TestHeadersThroughMiddleware(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, clock *sluicetest.ManualClock) {
		clock.Set(t0.Add(100 * time.Millisecond))
		h := mustNew(t, l, WithLimits(Limit{Name: "api", Rule: sluice.FixedWindow(2, 10*time.Second)}), WithClock(clock))(okHandler)
		a := from("192.0.2.1:1")
		want := []map[string]string{
			{"RateLimit-Policy": `"api";q=2;w=10`, "RateLimit": `"api";r=1;t=10`, "X-RateLimit-Remaining": "1", "X-RateLimit-Limit": "2", "Retry-After": ""},
			{"RateLimit": `"api";r=0;t=10`, "X-RateLimit-Remaining": "0", "Retry-After": ""},
			// Denied 9.9 s before the window ends: t and Retry-After are rounded up to 10.
			{"RateLimit": `"api";r=0;t=10`, "X-RateLimit-Remaining": "0", "Retry-After": "10",
				"X-RateLimit-Reset": strconv.FormatInt(t0.Unix()+10, 10), "Content-Type": "application/problem+json"},
		}
		for i, w := range want {
			rec := get(h, "/", a)
			for k, v := range w {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("request %d: %s = %q, want %q", i+1, k, got, v)
				}
			}
		}
		clock.Advance(9*time.Second + 800*time.Millisecond) // 0.1 s left
		rec := get(h, "/", a)
		if rec.Header().Get("Retry-After") != "1" || rec.Header().Get("RateLimit") != `"api";r=0;t=1` {
			t.Errorf("0.1 s before the reset: Retry-After %q, RateLimit %q; want 1 and t=1",
				rec.Header().Get("Retry-After"), rec.Header().Get("RateLimit"))
		}
	})
}

func TestHeaderStyleOption(t *testing.T) {
	l := backends[0].open(t, sluice.SystemClock{})
	for style, want := range map[HeaderStyle][]string{
		HeadersIETF: {"Ratelimit", "Ratelimit-Policy"},
		HeadersX:    {"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"},
		HeadersNone: {},
	} {
		h := mustNew(t, l, WithLimits(Limit{Name: "p" + style.String(), Rule: sluice.PerSecond(5)}), WithHeaderStyle(style))(okHandler)
		rec := get(h, "/", nil)
		var got []string
		for k := range rec.Header() {
			if k != "Content-Type" {
				got = append(got, k)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%v: headers %v, want %v", style, got, want)
		}
		for _, k := range want {
			if rec.Header().Get(k) == "" {
				t.Errorf("%v: %s missing", style, k)
			}
		}
	}
}

func TestDenialBodyAndCustomDenial(t *testing.T) {
	l := backends[0].open(t, sluice.SystemClock{})
	h := mustNew(t, l, WithLimits(Limit{Name: "tiny", Rule: sluice.FixedWindow(1, time.Minute)}))(okHandler)
	_ = get(h, "/", nil)
	rec := get(h, "/", nil)
	var p ProblemDetails
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if rec.Code != deny || p.Type != ProblemQuotaExceeded || p.Status != deny || !reflect.DeepEqual(p.ViolatedPolicies, []string{"tiny"}) {
		t.Errorf("429 body %+v (status %d)", p, rec.Code)
	}

	custom := mustNew(t, l, WithLimits(Limit{Name: "tiny2", Rule: sluice.FixedWindow(1, time.Minute)}),
		WithDenial(func(w http.ResponseWriter, r *http.Request, results []Result) {
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte(results[0].Name))
		}))(okHandler)
	_ = get(custom, "/", nil)
	rec = get(custom, "/", nil)
	if rec.Code != http.StatusTeapot || rec.Body.String() != "tiny2" || rec.Header().Get("RateLimit") == "" {
		t.Errorf("custom denial: %d %q, headers %v", rec.Code, rec.Body.String(), rec.Header())
	}
}

func TestCostFunction(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, _ *sluicetest.ManualClock) {
		var buf testenv.LogBuffer
		stats := &Stats{}
		cost := func(r *http.Request) int64 {
			switch r.URL.Query().Get("cost") {
			case "panic":
				panic("boom")
			case "":
				return 1
			default:
				n, _ := strconv.ParseInt(r.URL.Query().Get("cost"), 10, 64)
				return n
			}
		}
		h := mustNew(t, l, WithLimits(Limit{Name: "units", Rule: sluice.FixedWindow(10, time.Hour)}),
			WithCost(cost), WithLogger(logged(&buf)), WithStats(stats))(okHandler)
		remaining := func(target string) (int, string) {
			rec := get(h, target, nil)
			return rec.Code, rec.Header().Get("X-RateLimit-Remaining")
		}
		for _, step := range []struct {
			target, remaining string
			code              int
		}{
			{"/?cost=4", "6", ok},
			{"/?cost=0", "", ok},   // uncounted: no policy applied, no header
			{"/?cost=-5", "5", ok}, // a negative cost never refunds: charged 1
			{"/?cost=panic", "4", ok},
			{"/?cost=5", "4", deny}, // more than is left: denied, nothing consumed
			{"/?cost=11", "4", deny},
			{"/?cost=4", "0", ok},
		} {
			code, rem := remaining(step.target)
			if code != step.code || rem != step.remaining {
				t.Errorf("%s: %d remaining %q, want %d remaining %q", step.target, code, rem, step.code, step.remaining)
			}
		}
		if got := stats.BadInput.Load(); got != 2 {
			t.Errorf("BadInput = %d, want 2", got)
		}
		recs := buf.Records(t, "httplimit: cost function")
		if len(recs) != 1 || recs[0]["policy"] != "units" || recs[0]["path"] != "/" {
			t.Errorf("cost log (at most one a second): %v", recs)
		}
		// A cost above the capacity: the body says waiting will not help, and Retry-After (never
		// 0, issue 30) is at most the period, so a client does not retry at once.
		rec := get(h, "/?cost=11", nil)
		if s, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || s < 1 || s > 3600 || !contains(rec.Body.String(), "never") {
			t.Errorf("cost above capacity: Retry-After %q, body %s; want 1 to 3600 s and never", rec.Header().Get("Retry-After"), rec.Body.String())
		}
	})
}

// TestShaping: with WithWait a denied request waits for its slot instead of being rejected,
// within the budget and the request's context.
func TestShaping(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	s, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := sluice.New(s, sluice.WithClock(clock))
	stats := &Stats{}
	h := mustNew(t, l, WithLimits(Limit{Name: "shaped", Rule: sluice.FixedWindow(1, time.Second)}),
		WithWait(2*time.Second), WithClock(clock), WithStats(stats))(okHandler)
	if c := get(h, "/", nil).Code; c != ok {
		t.Fatalf("first: %d", c)
	}
	done := make(chan int)
	go func() { done <- get(h, "/", nil).Code }()
	for clock.Waiters() == 0 {
		runtime.Gosched() // until the request waits on the clock
	}
	clock.Advance(time.Second)
	if c := <-done; c != ok || stats.Waited.Load() != 1 {
		t.Errorf("waited request: %d, Waited %d", c, stats.Waited.Load())
	}
	// Over the budget: rejected at once, without waiting.
	tight := mustNew(t, l, WithLimits(Limit{Name: "tight", Rule: sluice.FixedWindow(1, time.Hour)}),
		WithWait(time.Second), WithClock(clock))(okHandler)
	_ = get(tight, "/", nil)
	if c := get(tight, "/", nil).Code; c != deny {
		t.Errorf("wait beyond the budget: %d", c)
	}
	// A cancelled request stops waiting.
	ctxDone := func(r *http.Request) {
		ctx, cancel := contextWithCancel(r)
		cancel()
		*r = *r.WithContext(ctx)
	}
	if c := get(h, "/", ctxDone).Code; c != deny {
		t.Errorf("cancelled request while the slot is taken: %d", c)
	}
}

func TestAllowedRequestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	l := backends[0].open(t, sluice.SystemClock{})
	rule := sluice.FixedWindow(1e9, time.Minute)
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	measure := func(h http.Handler) float64 {
		return testing.AllocsPerRun(200, func() {
			clear(w.Header())
			h.ServeHTTP(w, r)
		})
	}
	base := measure(okHandler)
	for _, tc := range []struct {
		style HeaderStyle
		extra float64
	}{{HeadersNone, 0}, {HeadersIETF, 2}, {HeadersX, 2}, {HeadersBoth, 2}} {
		h := mustNew(t, l, WithLimits(Limit{Name: "all", Rule: rule}, Limit{Name: "ip", Rule: rule, Key: Keys(KeyIP(), KeyMethod())}), WithHeaderStyle(tc.style))(okHandler)
		got := measure(h) - base
		t.Logf("%v: %v allocations beyond the bare handler (%v)", tc.style, got, base)
		if got > tc.extra {
			t.Errorf("%v: %v allocations per allowed request beyond the bare handler, want at most %v", tc.style, got, tc.extra)
		}
	}
}

// TestCostPerPolicy: the middleware's cost function runs once per request whatever the number
// of policies using it; a policy's own Cost overrides it.
func TestCostPerPolicy(t *testing.T) {
	l := backends[0].open(t, sluicetest.NewManualClock(t0))
	calls := 0
	h := mustNew(t, l, WithCost(func(*http.Request) int64 { calls++; return 2 }), WithLimits(
		Limit{Name: "a", Rule: sluice.FixedWindow(10, time.Hour)},
		Limit{Name: "b", Rule: sluice.FixedWindow(10, time.Hour)},
		Limit{Name: "c", Rule: sluice.FixedWindow(10, time.Hour), Cost: func(*http.Request) int64 { return 5 }},
	))(okHandler)
	rec := get(h, "/", nil)
	if calls != 1 {
		t.Errorf("WithCost ran %d times for one request", calls)
	}
	if got, want := rec.Header().Get("RateLimit"), `"a";r=8;t=3600, "b";r=8;t=3600, "c";r=5;t=3600`; got != want {
		t.Errorf("RateLimit = %s, want %s", got, want)
	}
}
