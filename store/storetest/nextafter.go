package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// testNextAfter holds a store's Decision.NextAfter, where it gives one, to what it says: on
// random small rules and random steps forward (after a step back, durations count from the
// newest sub-window's start, not from now), two keys get the same takes at the same instants; when
// an allowed take leaves nothing and says the next unit frees in x, a take of one unit x - 1ns
// later is denied on one key and a take x later admitted on the other. A store that never
// gives NextAfter passes; NextAfterChecks reports how often it was checked.
func testNextAfter(t *testing.T, newStore NewStore, run string) {
	eachAlgorithm(t, newStore, func(t *testing.T, a sluice.Algorithm, s sluice.Store, clock *sluicetest.ManualClock) {
		rng := Rand(t, 34)
		checked := 0
		for trial := range 40 {
			r := RandomRule(rng, a)
			for r.Capacity() > 12 {
				r = RandomRule(rng, a)
			}
			one := fmt.Sprintf("storetest:%s:next:%s:%d:", run, a, trial)
			if nextAfterTrial(t, s, clock, r, one+"a", one+"b", func(n int64) int64 { return 1 + rng.Int64N(n) }, func() time.Duration { return max(0, RandomStep(rng, r)) }) {
				checked++
			}
		}
		t.Logf("NextAfter checked in %d of 40 trials", checked)
	})
}

// nextAfterTrial takes random costs (cost(3)) on keys a and b at random steps until an allowed
// take gives a NextAfter, then checks it (see testNextAfter) and reports true; false when none
// was given within 100 takes.
func nextAfterTrial(t *testing.T, s sluice.Store, clock *sluicetest.ManualClock, r sluice.Rule, a, b string,
	cost func(int64) int64, step func() time.Duration) bool {
	t.Helper()
	ctx := context.Background()
	take := func(key string, n int64) sluice.Decision {
		t.Helper()
		d, err := s.Take(ctx, sluice.Request{Key: key, Rule: r, N: n})
		if err != nil {
			t.Fatalf("%s %s n=%d: %v", key, r, n, err)
		}
		return d
	}
	for range 100 {
		clock.Advance(step())
		n := cost(3)
		da, db := take(a, n), take(b, n)
		if da != db {
			t.Fatalf("%s: the same take on two keys of the same history: %+v and %+v", r, da, db)
		}
		switch {
		case da.NextAfter < 0 || da.NextAfter > 0 && (!da.Allowed || da.Remaining != 0):
			t.Fatalf("%s n=%d: %+v: NextAfter is for an allowed take that leaves nothing", r, n, da)
		case da.NextAfter == 0:
			continue
		}
		at := clock.Now()
		clock.Set(at.Add(da.NextAfter - 1))
		if d := take(a, 1); d.Allowed {
			t.Fatalf("%s: after %+v, a take of 1 at NextAfter-1ns was admitted: %+v", r, da, d)
		}
		clock.Set(at.Add(da.NextAfter))
		if d := take(b, 1); !d.Allowed {
			t.Fatalf("%s: after %+v, a take of 1 at NextAfter was denied: %+v", r, da, d)
		}
		return true
	}
	return false
}
