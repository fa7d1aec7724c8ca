package httplimit

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// The class travels in X-Criticality: SHEDDABLE requests stop at half the limit, CRITICAL
// ones (and unknown classes) at 90%, CRITICAL_PLUS ones use it all, on every store. The burst
// comes in the window's last millisecond, where the fixed window's pace (algorithm.TakeHoldback)
// has let every class's whole share through.
func TestCriticalityHeader(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, clock *sluicetest.ManualClock) {
		clock.Set(clock.Now().Truncate(time.Minute).Add(time.Minute - time.Millisecond))
		h := mustNew(t, l, WithClock(clock), WithLimits(Limit{Name: "api", Rule: sluice.FixedWindow(10, 60e9),
			Key: KeyRoute(), Shares: &sluice.DefaultShares}))(okHandler)
		class := func(c string) func(r *http.Request) {
			return func(r *http.Request) { r.Header.Set("X-Criticality", c) }
		}
		got := statuses(h, 6, "/", class("SHEDDABLE"))
		got = append(got, statuses(h, 5, "/", class("bogus"))...)
		got = append(got, statuses(h, 2, "/", class("CRITICAL_PLUS"))...)
		want := codes(200, 200, 200, 200, 200, 429, 200, 200, 200, 200, 429, 200, 429)
		if !slices.Equal(got, want) {
			t.Errorf("got  %v\nwant %v", got, want)
		}
	})
}

// On a policy with shares the class reaches the store too (Request.Criticality), so a store
// that serves classes apart (the quota client) sees it.
func TestCriticalityReachesStore(t *testing.T) {
	st := &sluicetest.Recorder{}
	h := mustNew(t, sluice.New(st), WithLimits(Limit{Name: "api", Rule: sluice.FixedWindow(10, 60e9),
		Key: KeyRoute(), Shares: &sluice.DefaultShares}))(okHandler)
	for _, c := range []string{"SHEDDABLE", "CRITICAL_PLUS", "bogus"} {
		statuses(h, 1, "/", func(r *http.Request) { r.Header.Set("X-Criticality", c) })
	}
	if want := []sluice.Criticality{sluice.Sheddable, sluice.CriticalPlus, sluice.Critical}; !slices.Equal(st.Classes(), want) {
		t.Fatalf("store saw %v, want %v", st.Classes(), want)
	}
}
