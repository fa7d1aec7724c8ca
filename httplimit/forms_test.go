package httplimit

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestRuleFormsMiddleware: the rule forms of issue 23 item 2 that the middleware has, as in
// proxy's TestRuleForms: several limits on one request (the b 100/60s, a 5/10s), each
// advertised with its own numbers and the 429 naming the one that denied; a block (limit 0)
// is refused by New and left out by Middleware, never a panic.
func TestRuleFormsMiddleware(t *testing.T) {
	t.Run("several limits", func(t *testing.T) {
		eachBackend(t, func(t *testing.T, l *sluice.Limiter, clock *sluicetest.ManualClock) {
			h := Middleware(l, WithLimits(
				Limit{Name: "b", Rule: sluice.Rule{Algorithm: sluice.AlgorithmSlidingWindow, Limit: 100, Period: time.Minute}},
				Limit{Name: "a", Rule: sluice.Rule{Algorithm: sluice.AlgorithmSlidingWindow, Limit: 5, Period: 10 * time.Second}},
			), WithKeyPrefix("forms:"+strconv.FormatInt(time.Now().UnixNano(), 36)+":"))(okHandler)
			for i := range 6 {
				w := get(h, "/", from("192.0.2.1:1"))
				if policy := w.Header().Get("RateLimit-Policy"); policy != `"b";q=100;w=60, "a";q=5;w=10` {
					t.Errorf("request %d: RateLimit-Policy %q", i, policy)
				}
				want := `"b";r=` + strconv.Itoa(99-i) + `;t=\d+, "a";r=` + strconv.Itoa(4-i) + `;t=\d+`
				if i == 5 {
					want = `"b";r=95;t=\d+, "a";r=0;t=\d+`
				}
				if got := w.Header().Get("RateLimit"); !regexp.MustCompile("^" + want + "$").MatchString(got) {
					t.Errorf("request %d: RateLimit %q, want %s", i, got, want)
				}
				if i < 5 {
					if w.Code != http.StatusOK {
						t.Fatalf("request %d: %d", i, w.Code)
					}
					continue
				}
				var p ProblemDetails
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != http.StatusTooManyRequests ||
					len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "a" || w.Header().Get("Retry-After") == "" {
					t.Errorf("denial: %d %v %s", w.Code, err, w.Body)
				}
			}
		})
	})
	t.Run("block", func(t *testing.T) {
		l := backends[0].open(t, sluicetest.NewManualClock(t0))
		closed := Limit{Name: "closed", Rule: sluice.Rule{Algorithm: sluice.AlgorithmFixedWindow, Period: time.Minute}}
		_, err := New(l, WithLimits(closed))
		var fe *sluice.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("New with a limit of 0: %v, want a field error", err)
		}
		h := Middleware(l, WithLimits(closed), WithLogger(quietLogger()))(okHandler)
		if w := get(h, "/", from("192.0.2.1:1")); w.Code != http.StatusOK {
			t.Errorf("Middleware with only a refused limit: %d", w.Code)
		}
	})
}
