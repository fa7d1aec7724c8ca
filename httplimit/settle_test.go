package httplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestSettle: with WithSettle the cost function takes an estimate and the handler's
// reported cost is settled after it returns: an over-estimate is refunded, an overage is
// charged past the limit and denies the client's next requests until the debt is paid. A
// policy with a cost of its own is left alone. On memory and Redis.
func TestSettle(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, clock *sluicetest.ManualClock) {
		stats := &Stats{}
		estimate := func(r *http.Request) int64 {
			n, _ := strconv.ParseInt(r.URL.Query().Get("estimate"), 10, 64)
			return n
		}
		report := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v := r.URL.Query().Get("real"); v != "" {
				n, _ := strconv.ParseInt(v, 10, 64)
				if !Settle(r, n/2) || !Settle(r, n-n/2) { // reported as it accrues
					t.Errorf("Settle(%d) inside the handler: false", n)
				}
			}
		})
		h := mustNew(t, l, WithSettle(), WithCost(estimate), WithStats(stats), WithLimits(
			Limit{Name: "tokens", Rule: sluice.TokenBucket(100, time.Minute, 0)}, // 0.6 s a token
			Limit{Name: "calls", Rule: sluice.FixedWindow(1000, time.Hour), Cost: func(*http.Request) int64 { return 1 }},
		))(report)
		for _, step := range []struct {
			after      time.Duration // since t0
			target     string
			code       int
			remaining  string // the tokens policy's, as the request was decided
			retryAfter string
		}{
			{0, "/?estimate=50&real=10", ok, "50", ""},  // 40 refunded: 90 left
			{0, "/?estimate=50", ok, "40", ""},          // nothing reported: the estimate stands
			{0, "/?estimate=30&real=330", ok, "10", ""}, // 300 more: 390 used, the debt capped at a period's refill, 100
			{0, "/?estimate=1", deny, "0", "61"},        // 101 tokens to refill, 60.6 s
			{60 * time.Second, "/?estimate=1", deny, "0", "1"},
			{60*time.Second + 600*time.Millisecond, "/?estimate=1", ok, "0", ""},
		} {
			clock.Set(t0.Add(step.after))
			rec := get(h, step.target, nil)
			if rec.Code != step.code || rec.Header().Get("X-RateLimit-Remaining") != step.remaining || rec.Header().Get("Retry-After") != step.retryAfter {
				t.Errorf("+%v %s: %d remaining %q retry-after %q, want %d remaining %q retry-after %q", step.after, step.target,
					rec.Code, rec.Header().Get("X-RateLimit-Remaining"), rec.Header().Get("Retry-After"), step.code, step.remaining, step.retryAfter)
			}
		}
		// The calls policy, with a cost of its own, counted 4 requests and no settle.
		if d, err := l.Peek(context.Background(), "http:calls:192.0.2.1", sluice.FixedWindow(1000, time.Hour)); err != nil || d.Remaining != 996 {
			t.Errorf("calls policy: %+v %v, want 996 remaining", d, err)
		}
		if got := stats.Settled.Load(); got != 2 {
			t.Errorf("Settled = %d, want 2", got)
		}
	})
}

// TestSettleOutsideTheHandler: Settle reports false, and changes nothing, for a request the
// middleware did not charge, after the handler returned, and for a negative cost.
func TestSettleOutsideTheHandler(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, _ *sluicetest.ManualClock) {
		if Settle(httptest.NewRequest(http.MethodGet, "/", nil), 5) {
			t.Error("Settle on a request that no middleware saw: true")
		}
		stats := &Stats{}
		var kept *http.Request
		h := mustNew(t, l, WithSettle(), WithStats(stats), WithLimits(Limit{Name: "p", Rule: sluice.FixedWindow(3, time.Hour)}))(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				kept = r
				if Settle(r, -1) {
					t.Error("Settle with a negative cost: true")
				}
			}))
		if rec := get(h, "/", nil); rec.Code != ok {
			t.Fatalf("first request: %d", rec.Code)
		}
		if Settle(kept, 100) {
			t.Error("Settle after the handler returned: true")
		}
		if rec := get(h, "/", nil); rec.Code != ok || rec.Header().Get("X-RateLimit-Remaining") != "1" {
			t.Errorf("second request: %d remaining %q, want 1 (nothing settled)", rec.Code, rec.Header().Get("X-RateLimit-Remaining"))
		}
		if stats.BadInput.Load() != 2 || stats.Settled.Load() != 0 {
			t.Errorf("BadInput %d Settled %d, want 2 and 0", stats.BadInput.Load(), stats.Settled.Load())
		}
	})
}

// TestSettleAllocations: WithSettle costs an allowed request two allocations (the context
// that carries the settlement and the request copy that carries it), and a reported cost one
// more, the settle's own context (on the memory store).
func TestSettleAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	l := backends[0].open(t, sluice.SystemClock{})
	rule := sluice.TokenBucket(1e9, time.Minute, 0)
	w := httptest.NewRecorder()
	measure := func(h http.Handler, target string) float64 {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		return testing.AllocsPerRun(200, func() { h.ServeHTTP(w, r) })
	}
	report := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			Settle(r, 2)
		}
	})
	plain := mustNew(t, l, WithLimits(Limit{Name: "p", Rule: rule}), WithHeaderStyle(HeadersNone))(report)
	settled := mustNew(t, l, WithSettle(), WithLimits(Limit{Name: "p", Rule: rule}), WithHeaderStyle(HeadersNone))(report)
	base := measure(plain, "/")
	if got := measure(settled, "/") - base; got > 2 {
		t.Errorf("WithSettle: %v allocations per request beyond the middleware's, want at most 2", got)
	}
	got := measure(settled, "/?report") - base
	t.Logf("WithSettle with a reported cost: %v allocations beyond the middleware's", got)
	if got > 3 {
		t.Errorf("WithSettle with a reported cost: %v allocations per request beyond the middleware's, want at most 3", got)
	}
}
