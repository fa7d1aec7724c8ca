package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/redis"
)

// TestNextAfterGiven: the windows' scripts tell when the next unit frees after an allowed
// take that leaves nothing (storetest's NextAfter holds them to what it says), in a single
// call and in a batched one; the other algorithms, and a take that leaves units, say 0.
func TestNextAfterGiven(t *testing.T) {
	c := standalone(t)
	clock := sluicetest.NewManualClock(t0)
	rs := newStore(t, c, redis.WithClock(clock))
	ctx := context.Background()
	for _, r := range []sluice.Rule{sluice.FixedWindow(2, time.Second), sluice.SlidingWindow(2, time.Second, 1), sluice.SlidingWindow(2, time.Second, 4), sluice.GCRA(2, time.Second, 0)} {
		key := "next:" + r.String()
		d1, err := rs.Take(ctx, sluice.Request{Key: key, Rule: r, N: 1})
		if err != nil || !d1.Allowed || d1.NextAfter != 0 {
			t.Fatalf("%s: first take %+v %v, want allowed with no NextAfter (1 left)", r, d1, err)
		}
		d2, err := rs.Take(ctx, sluice.Request{Key: key, Rule: r, N: 1})
		window := r.Algorithm == sluice.AlgorithmFixedWindow || r.Algorithm == sluice.AlgorithmSlidingWindow
		if err != nil || !d2.Allowed || d2.Remaining != 0 || (d2.NextAfter > 0) != window {
			t.Fatalf("%s: second take %+v %v, want allowed, 0 left, NextAfter given: %v", r, d2, err, window)
		}
	}
	// Batched: concurrent takes of one key share a script call; every one that leaves nothing
	// says when the next unit frees.
	r := sluice.SlidingWindow(1000, time.Second, 1)
	done := make(chan sluice.Decision, 1100)
	for range 1100 {
		go func() {
			d, err := rs.Take(ctx, sluice.Request{Key: "next:batch", Rule: r, N: 1})
			if err != nil {
				t.Error(err)
			}
			done <- d
		}()
	}
	given := 0
	for range 1100 {
		if d := <-done; d.Allowed && d.Remaining == 0 && d.NextAfter > 0 {
			given++
		}
	}
	if given != 1 {
		t.Errorf("%d takes left nothing with a NextAfter, want 1 (the 1000th)", given)
	}
}
