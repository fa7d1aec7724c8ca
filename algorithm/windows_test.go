package algorithm_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// With nothing carried, TakeCarrying decides exactly as Take, over changes of limit and
// period, refunds, costs above the limit and a clock that jumps back.
func TestTakeCarryingNothingIsTake(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var plain, carrying algorithm.FixedWindow
	now := time.Unix(1_700_000_000, 0).UnixNano()
	r := sluice.FixedWindow(10, 100*time.Millisecond)
	for i := range 20_000 {
		now += rng.Int64N(int64(30 * time.Millisecond))
		if rng.IntN(30) == 0 {
			now -= rng.Int64N(int64(200 * time.Millisecond))
		}
		if rng.IntN(200) == 0 {
			r = sluice.FixedWindow(1+rng.Int64N(20), time.Duration(1+rng.IntN(5))*50*time.Millisecond)
		}
		p := algorithm.Compile(r)
		n := rng.Int64N(r.Limit+3) - 2
		var c algorithm.Carried
		want := plain.Take(now, &p, n, 0)
		got := carrying.TakeCarrying(now, &p, n, &c)
		if got != want || c != (algorithm.Carried{}) {
			t.Fatalf("step %d (%v, n=%d): TakeCarrying %+v (carried %+v), Take %+v", i, r, n, got, c, want)
		}
	}
}

// Carried units are taken back first, and leave at their own end: a denial whose cost fits
// once they have left retries then, and a window holding only them resets then.
func TestTakeCarrying(t *testing.T) {
	p := algorithm.Compile(sluice.FixedWindow(10, time.Second))
	const ms = int64(time.Millisecond)
	w := algorithm.FixedWindow{End: 1000 * ms, Count: 8}
	c := algorithm.Carried{Count: 6, End: 300 * ms} // 6 of the 8 leave at 300ms
	if d := w.TakeCarrying(100*ms, &p, 4, &c); d.Allowed || d.RetryAfter != 200*time.Millisecond {
		t.Fatalf("4 more units: %+v, want denied until the carried units leave (200ms)", d)
	}
	if d := w.TakeCarrying(100*ms, &p, 9, &c); d.Allowed || d.RetryAfter != 900*time.Millisecond {
		t.Fatalf("9 more units: %+v, want denied until the window ends (900ms)", d)
	}
	if d := w.TakeCarrying(100*ms, &p, -3, &c); !d.Allowed || c.Count != 3 || w.Count != 5 {
		t.Fatalf("refund of 3: %+v, carried %d, count %d; want 3 carried of 5", d, c.Count, w.Count)
	}
	if d := w.TakeCarrying(100*ms, &p, -2, &c); c.Count != 1 || w.Count != 3 || d.ResetAfter != 900*time.Millisecond {
		t.Fatalf("refund of 2: %+v, carried %d, count %d; want 1 carried of 3, reset at the window's end", d, c.Count, w.Count)
	}
	if d := w.TakeCarrying(100*ms, &p, -2, &c); c.Count != 0 || w.Count != 1 {
		t.Fatalf("refund of 2 more: %+v, carried %d, count %d; want 0 carried of 1", d, c.Count, w.Count)
	}
	w, c = algorithm.FixedWindow{End: 1000 * ms, Count: 4}, algorithm.Carried{Count: 4, End: 300 * ms}
	if d := w.TakeCarrying(100*ms, &p, 0, &c); d.ResetAfter != 200*time.Millisecond {
		t.Fatalf("only carried units: %+v, want a reset when they leave (200ms)", d)
	}
}

// The zero SlidingWindow estimates nothing (and does not panic).
func TestSlidingWindowEstimateZero(t *testing.T) {
	var s algorithm.SlidingWindow
	if got, at := s.Estimate(42); got != 0 || at != 42 {
		t.Fatalf("Estimate = %d at %d, want 0 at 42", got, at)
	}
}
