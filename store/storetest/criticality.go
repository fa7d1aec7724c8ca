package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// testCriticality checks requests with a criticality holdback (sluice.Request.Holdback) on every
// algorithm, with the default shares on a capacity of 10 (holdbacks: SHEDDABLE 5,
// SHEDDABLE_PLUS 3, CRITICAL 1, CRITICAL_PLUS 0): each class is admitted only while its share
// of the one shared counter holds, a denied request consumes nothing, and a cost above the
// class's share can never be admitted. It decides in the last millisecond of a window, where a
// fixed window's pace (algorithm.TakeHoldback) has let every class's whole share through;
// testCriticalityPace checks the pace.
func testCriticality(t *testing.T, newStore NewStore, run string) {
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			rule := sluice.Rule{Algorithm: a, Limit: 10, Period: time.Second}
			start := Base.Add(rule.Period - time.Millisecond)
			clock := sluicetest.NewManualClock(start)
			s := newStore(t, clock)
			key := "storetest:" + run + ":criticality:" + a.String()
			take := func(n int64, c sluice.Criticality) sluice.Decision {
				t.Helper()
				req := sluice.Request{Key: key, Rule: rule, N: n, Holdback: sluice.DefaultShares.Holdback(c, rule.Capacity())}
				d, err := s.Take(context.Background(), req)
				if err != nil {
					t.Fatalf("n=%d %v: %v", n, c, err)
				}
				return d
			}
			steps := []struct {
				n       int64
				c       sluice.Criticality
				allowed bool
				remain  int64
			}{
				{4, sluice.Sheddable, true, 1},      // 4 used; 6 left, 1 above SHEDDABLE's holdback of 5
				{2, sluice.Sheddable, false, 1},     // 6 > its share of 5
				{3, sluice.SheddablePlus, true, 0},  // 7 used: SHEDDABLE_PLUS's share
				{2, sluice.Critical, true, 0},       // 9 used: CRITICAL's share
				{1, sluice.Critical, false, 0},      // 10 > 9
				{1, sluice.SheddablePlus, false, 0}, // denials consumed nothing: still 9 used
				{1, sluice.CriticalPlus, true, 0},   // the whole capacity
			}
			for i, st := range steps {
				d := take(st.n, st.c)
				if d.Allowed != st.allowed || d.Remaining != st.remain || (!d.Allowed && d.RetryAfter <= 0) {
					t.Fatalf("step %d: %d units %v: %+v, want allowed %v with %d remaining (and a positive RetryAfter when denied)",
						i, st.n, st.c, d, st.allowed, st.remain)
				}
			}
			if d, err := s.Take(context.Background(), sluice.Request{Key: key, Rule: rule, N: 0}); err != nil || d.Remaining != 0 {
				t.Fatalf("peek: %+v %v, want 0 remaining", d, err)
			}
			clock.Set(start.Add(3 * rule.Period))
			if d := take(6, sluice.Sheddable); d.Allowed || d.RetryAfter != sluice.Never {
				t.Fatalf("6 units of SHEDDABLE (share 5): %+v, want never", d)
			}
			if d := take(5, sluice.Sheddable); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("5 units of SHEDDABLE on a full key: %+v, want allowed with 0 above the holdback", d)
			}
		})
	}
}

// testCriticalityPace checks a fixed window's pace (algorithm.TakeHoldback): a class below
// CRITICAL_PLUS may use only its share of what the window has let through so far (the part
// begun, in whole milliseconds, plus a lead of 1/16 of the window), so the lower classes
// cannot spend their ceilings at a window's start; a refused request is told the instant the
// pace will admit it, in this window or the next. Capacity 10, period 1s (lead 62ms), shares SHEDDABLE 5,
// CRITICAL 9.
func testCriticalityPace(t *testing.T, newStore NewStore, run string) {
	clock := sluicetest.NewManualClock(Base)
	s := newStore(t, clock)
	rule := sluice.FixedWindow(10, time.Second)
	key := "storetest:" + run + ":criticality-pace"
	ms := time.Millisecond
	steps := []struct {
		at      time.Duration
		n       int64
		c       sluice.Criticality
		allowed bool
		remain  int64
		retry   time.Duration
	}{
		{0, 1, sluice.Sheddable, false, 0, 137 * ms},        // paced share 5 x 63/1000 = 0; 1 at 5 x 200/1000
		{0, 2, sluice.CriticalPlus, true, 8, 0},             // no pace at the top
		{0, 1, sluice.Critical, false, 0, 271 * ms},         // 3 units need 9 x 334/1000
		{271 * ms, 1, sluice.Critical, true, 0, 0},          // 3 used: all of CRITICAL's paced share
		{271 * ms, 1, sluice.Sheddable, false, 0, 466 * ms}, // 4 units need 5 x 800/1000, at 737ms
		{271 * ms, 3, sluice.CriticalPlus, true, 4, 0},      // 6 used
		{271 * ms, 1, sluice.Sheddable, false, 0, 866 * ms}, // 7 > its share 5: the next window's 137ms
		{937 * ms, 1, sluice.Sheddable, false, 0, 200 * ms}, // the whole share, used: the next window's 137ms
		{937 * ms, 2, sluice.Critical, true, 1, 0},          // 8 used
		{1137 * ms, 1, sluice.Sheddable, true, 0, 0},        // a new window, 137ms in
	}
	for i, st := range steps {
		clock.Set(Base.Add(st.at))
		req := sluice.Request{Key: key, Rule: rule, N: st.n, Holdback: sluice.DefaultShares.Holdback(st.c, rule.Capacity())}
		d, err := s.Take(context.Background(), req)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if d.Allowed != st.allowed || d.Remaining != st.remain || d.RetryAfter != st.retry {
			t.Fatalf("step %d at +%v: %d units %v: %+v, want allowed %v, %d remaining, retry after %v",
				i, st.at, st.n, st.c, d, st.allowed, st.remain, st.retry)
		}
	}
}
