package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// testCriticality checks requests with a criticality reserve (sluice.Request.Reserve) on every
// algorithm, with the default shares on a capacity of 10 (reserves: SHEDDABLE 5,
// SHEDDABLE_PLUS 3, CRITICAL 1, CRITICAL_PLUS 0): each class is admitted only while its share
// of the one shared counter holds, a denied request consumes nothing, and a cost above the
// class's share can never be admitted.
func testCriticality(t *testing.T, newStore NewStore, run string) {
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			clock := sluicetest.NewManualClock(Base)
			s := newStore(t, clock)
			rule := sluice.Rule{Algorithm: a, Limit: 10, Period: time.Second}
			key := "storetest:" + run + ":criticality:" + a.String()
			take := func(n int64, c sluice.Criticality) sluice.Decision {
				t.Helper()
				req := sluice.Request{Key: key, Rule: rule, N: n, Reserve: sluice.DefaultShares.Reserve(c, rule.Capacity())}
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
				{4, sluice.Sheddable, true, 1},      // 4 used; 6 left, 1 above SHEDDABLE's reserve of 5
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
			clock.Set(Base.Add(3 * rule.Period))
			if d := take(6, sluice.Sheddable); d.Allowed || d.RetryAfter != sluice.Never {
				t.Fatalf("6 units of SHEDDABLE (share 5): %+v, want never", d)
			}
			if d := take(5, sluice.Sheddable); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("5 units of SHEDDABLE on a full key: %+v, want allowed with 0 above the reserve", d)
			}
		})
	}
}
