package distributed

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// A rule change of period or sub-windows carries the key's estimate over, as
// algorithm.SlidingWindow.reshape does: a single process still decides exactly as the memory
// store does while the rule's shape keeps changing.
func TestAsyncRuleChangeMatchesMemory(t *testing.T) {
	// Every shape has its own sub-window length (the same length keeps the counters: see
	// TestAsyncRuleChangeSameLength), and none comes back (a shape that comes back within a
	// period finds its old counters in the store as well as in the carried estimate: it
	// over-counts, conservatively).
	shapes := []sluice.Rule{
		sluice.SlidingWindow(20, 120*time.Millisecond, 4),
		sluice.SlidingWindow(20, 240*time.Millisecond, 4),
		sluice.SlidingWindow(15, 100*time.Millisecond, 1),
		sluice.SlidingWindow(25, 350*time.Millisecond, 5),
		sluice.SlidingWindow(12, 80*time.Millisecond, 2),
		sluice.SlidingWindow(40, 500*time.Millisecond, 2),
		sluice.SlidingWindow(9, 90*time.Millisecond, 1),
		sluice.SlidingWindow(30, 200*time.Millisecond, 4),
	}
	clock := sluicetest.NewManualClock(t0)
	ref := newMemory(t, clock)
	a := newAsync(t, newMemory(t, clock), WithClock(clock), WithManualSync())
	rng := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	for i := range 4000 {
		clock.Advance(time.Duration(rng.IntN(12)) * time.Millisecond)
		rule := shapes[i*len(shapes)/4000]
		n := int64(rng.IntN(4))
		if rng.IntN(10) == 0 {
			n = -int64(rng.IntN(3))
		}
		req := sluice.Request{Key: "k", Rule: rule, N: n}
		want, err1 := ref.Take(ctx, req)
		got, err2 := a.Take(ctx, req)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if got != want {
			t.Fatalf("step %d (%s) n=%d at +%v: async %+v, memory %+v", i, rule, n, clock.Now().Sub(t0), got, want)
		}
		if rng.IntN(5) == 0 {
			if err := a.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A change that keeps the sub-window length (here 100ms: one window of 100ms, then three of
// 100ms) keeps the counters of those windows: nothing is lost or counted twice.
func TestAsyncRuleChangeSameLength(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	shared := newMemory(t, clock)
	a := newAsync(t, shared, WithClock(clock), WithManualSync())
	ctx := context.Background()
	take := func(rule sluice.Rule, n int64) sluice.Decision {
		t.Helper()
		d, err := a.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: n})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for range 3 { // 4 units in each of windows 0, 1, 2 (100ms each)
		if d := take(sluice.SlidingWindow(10, 100*time.Millisecond, 1), 4); !d.Allowed {
			t.Fatalf("%+v", d)
		}
		clock.Advance(100 * time.Millisecond)
	}
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// At the start of window 3, 300ms/3 counts windows 0..2 in full: 12 units.
	// The two-window view held windows 1 and 2; window 0 comes back from the store at the
	// next sync.
	if d := take(sluice.SlidingWindow(20, 300*time.Millisecond, 3), 0); d.Remaining != 20-8 {
		t.Fatalf("after the change: %+v, want 12 remaining (the kept counters of windows 1-2)", d)
	}
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d := take(sluice.SlidingWindow(20, 300*time.Millisecond, 3), 0); d.Remaining != 20-12 {
		t.Fatalf("after a sync: %+v, want 8 remaining (windows 0-2, nothing counted twice)", d)
	}
}

// A fixed window's count is carried until the end of the window it was counted in, as
// algorithm.FixedWindow keeps counting in its current window after a change of period.
func TestAsyncFixedWindowPeriodChange(t *testing.T) {
	clock := sluicetest.NewManualClock(t0.Add(200 * time.Millisecond))
	ref := newMemory(t, clock)
	a := newAsync(t, newMemory(t, clock), WithClock(clock), WithManualSync())
	ctx := context.Background()
	both := func(rule sluice.Rule, n int64) (sluice.Decision, sluice.Decision) {
		t.Helper()
		req := sluice.Request{Key: "k", Rule: rule, N: n}
		got, err := a.Take(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.Take(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return got, want
	}
	if got, _ := both(sluice.FixedWindow(10, time.Second), 10); !got.Allowed {
		t.Fatal("the first 10 units were denied")
	}
	clock.Advance(100 * time.Millisecond)
	got, want := both(sluice.FixedWindow(10, 2*time.Second), 1)
	if got.Allowed || got.RetryAfter != 700*time.Millisecond || got != want {
		t.Fatalf("after the change of period: async %+v, memory %+v; want denied until the old window ends", got, want)
	}
	clock.Advance(700 * time.Millisecond)
	if got, _ := both(sluice.FixedWindow(10, 2*time.Second), 1); !got.Allowed {
		t.Fatalf("after the old window ended: %+v, want allowed", got)
	}
}

// Each process carries its own view of the old shape; nothing carried is pushed to the store,
// so the global counters of the new shape are not inflated once per process.
func TestAsyncRuleChangeAcrossNodes(t *testing.T) {
	clock := sluicetest.NewManualClock(t0.Add(900 * time.Millisecond))
	shared := newMemory(t, clock)
	nodes := []*Async{
		newAsync(t, shared, WithClock(clock), WithManualSync()),
		newAsync(t, shared, WithClock(clock), WithManualSync()),
	}
	ctx := context.Background()
	old := sluice.SlidingWindow(10, time.Second, 1)
	for i := range 10 {
		if d, err := nodes[0].Take(ctx, sluice.Request{Key: "k", Rule: old, N: 1}); err != nil || !d.Allowed {
			t.Fatalf("unit %d: %+v %v", i, d, err)
		}
	}
	for _, a := range nodes { // node 1 peeks, so its sync pulls node 0's units
		if _, err := a.Take(ctx, sluice.Request{Key: "k", Rule: old, N: 0}); err != nil {
			t.Fatal(err)
		}
		if err := a.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(200 * time.Millisecond) // 0.1 s into the next window: estimate ceil(10 x 0.9) = 9
	changed := sluice.SlidingWindow(10, 2*time.Second, 1)
	for i, a := range nodes {
		d, err := a.Take(ctx, sluice.Request{Key: "k", Rule: changed, N: 2})
		if err != nil || d.Allowed || d.Remaining != 1 {
			t.Fatalf("node %d after the change: %+v %v, want denied with 1 remaining", i, d, err)
		}
		if err := a.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The new shape's global counter holds only what was admitted under it: one unit each.
	for i, a := range nodes {
		d, err := a.Take(ctx, sluice.Request{Key: "k", Rule: changed, N: 1})
		if err != nil || !d.Allowed {
			t.Fatalf("node %d: %+v %v", i, d, err)
		}
		if err := a.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	batch := []sluice.WindowCounts{{Key: "k", Length: 2 * time.Second, First: clock.Now().UnixNano() / int64(2*time.Second),
		Deltas: []int64{0}, Totals: []int64{0}, TTL: time.Minute}}
	if err := shared.AddWindowCounts(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if batch[0].Totals[0] != 2 {
		t.Fatalf("global count of the new window %d, want 2 (nothing carried pushed)", batch[0].Totals[0])
	}
}
