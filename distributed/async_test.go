package distributed

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

var t0 = time.Unix(1_700_000_000, 0)

func newMemory(t *testing.T, clock sluice.Clock) *memory.Store {
	t.Helper()
	s, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newAsync(t *testing.T, s sluice.Store, opts ...Option) *Async {
	t.Helper()
	a, err := NewAsync(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// A single process decides exactly as the memory store does, whatever the sync schedule.
func TestAsyncSingleNodeMatchesMemory(t *testing.T) {
	rules := []sluice.Rule{
		sluice.FixedWindow(7, 100*time.Millisecond),
		sluice.SlidingWindow(7, 100*time.Millisecond, 1),
		sluice.SlidingWindow(20, 120*time.Millisecond, 4),
	}
	for _, rule := range rules {
		t.Run(rule.String(), func(t *testing.T) {
			clock := sluicetest.NewManualClock(t0)
			ref := newMemory(t, clock)
			shared := newMemory(t, clock)
			a := newAsync(t, shared, WithClock(clock), WithManualSync())
			rng := rand.New(rand.NewPCG(1, 2))
			ctx := context.Background()
			for i := range 3000 {
				clock.Advance(time.Duration(rng.IntN(12)) * time.Millisecond)
				n := int64(rng.IntN(4))
				if rng.IntN(10) == 0 {
					n = -int64(rng.IntN(3)) // refunds
				}
				if rng.IntN(50) == 0 {
					n = rule.Limit + 1
				}
				req := sluice.Request{Key: "k", Rule: rule, N: n}
				if rng.IntN(8) == 0 { // settles, past the limit too
					req.Settle, req.N = true, int64(rng.IntN(3*int(rule.Limit)))-rule.Limit
				}
				want, err1 := ref.Take(ctx, req)
				got, err2 := a.Take(ctx, req)
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				if got != want {
					t.Fatalf("step %d n=%d settle=%v at +%v: async %+v, memory %+v", i, req.N, req.Settle, clock.Now().Sub(t0), got, want)
				}
				if rng.IntN(5) == 0 {
					if err := a.Sync(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

func TestAsyncBadOptions(t *testing.T) {
	s := newMemory(t, sluicetest.NewManualClock(t0))
	for _, c := range []struct {
		opt  Option
		name string
	}{
		{WithInterval(0), "WithInterval"},
		{WithInterval(-time.Second), "WithInterval"},
		{WithTimeout(-1), "WithTimeout"},
		{WithMaxStaleness(-1), "WithMaxStaleness"},
		{WithMaxKeys(0), "WithMaxKeys"},
	} {
		if _, err := NewAsync(s, c.opt); err == nil || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: got %v, want an error naming it", c.name, err)
		}
	}
	if _, err := NewAsync(takeOnly{s}); err == nil || !strings.Contains(err.Error(), "WindowCounter") {
		t.Errorf("store without the capability: got %v", err)
	}
	if _, err := NewAsync(nil); !errors.Is(err, sluice.ErrNoStore) {
		t.Errorf("nil store: got %v", err)
	}
}

// takeOnly hides every capability but Take.
type takeOnly struct{ s sluice.Store }

func (s takeOnly) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	return s.s.Take(ctx, req)
}

// Close pushes what is pending: nothing counted is lost.
func TestAsyncCloseFlushes(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	shared := newMemory(t, clock)
	rule := sluice.FixedWindow(100, time.Minute)
	a, _ := NewAsync(shared, WithClock(clock), WithManualSync())
	b := newAsync(t, shared, WithClock(clock), WithManualSync())
	ctx := context.Background()
	for range 30 {
		a.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1})
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1}); !errors.Is(err, sluice.ErrClosed) {
		t.Fatalf("Take after Close: %v", err)
	}
	b.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 0})
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	d, _ := b.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 0})
	if d.Remaining != 70 {
		t.Fatalf("after a's Close, b sees remaining %d, want 70", d.Remaining)
	}
}

// A failed sync keeps the deltas; the next one pushes them.
func TestAsyncSyncFailureKeepsDeltas(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	shared := newMemory(t, clock)
	flaky := sluicetest.NewFlakyStore(shared)
	rule := sluice.SlidingWindow(100, time.Minute, 6)
	a := newAsync(t, flaky, WithClock(clock), WithManualSync())
	ctx := context.Background()
	for range 10 {
		a.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1})
	}
	flaky.SetFailing(true)
	if err := a.Sync(ctx); !errors.Is(err, sluice.ErrStoreUnavailable) {
		t.Fatalf("sync against a failing store: %v", err)
	}
	clock.Advance(25 * time.Second) // the windows move on meanwhile
	for range 5 {
		a.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1})
	}
	flaky.SetFailing(false)
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var got int64
	for i := range 7 {
		first := clock.Now().Add(-time.Minute).UnixNano() / int64(10*time.Second)
		item := []sluice.WindowCounts{{Key: "k", Length: 10 * time.Second, First: first + int64(i),
			Deltas: []int64{0}, Totals: []int64{0}, TTL: time.Minute}}
		shared.AddWindowCounts(ctx, item)
		got += item[0].Totals[0]
	}
	if got != 15 {
		t.Fatalf("store holds %d units, want 15", got)
	}
}

// Three processes sharing a key, each offered rate units per second, syncing every
// interval: every window admits at most limit + (nodes-1) x 2 x rate x interval (the
// documented worst case), and in practice about half of that.
func TestAsyncOverAdmissionBound(t *testing.T) {
	for _, interval := range []time.Duration{50 * time.Millisecond, 500 * time.Millisecond} {
		for _, rule := range []sluice.Rule{sluice.FixedWindow(1000, 2*time.Second), sluice.SlidingWindow(1000, 2*time.Second, 4)} {
			t.Run(interval.String()+"/"+rule.String(), func(t *testing.T) {
				clock := sluicetest.NewManualClock(t0)
				shared := newMemory(t, clock)
				over := measureOverAdmission(t, shared, clock, rule, interval, 3, 400)
				bound := boundFor(rule, interval, 3, 400)
				t.Logf("worst window admitted %d over the limit; bound %d", over, bound)
				if over > bound {
					t.Fatalf("over-admission %d > bound %d", over, bound)
				}
			})
		}
	}
}

// boundFor is the documented worst case: (nodes-1) x min(limit, 2 x rate x interval).
func boundFor(rule sluice.Rule, interval time.Duration, nodes, rate int64) int64 {
	per := 2 * rate * int64(interval) / int64(time.Second)
	return (nodes - 1) * min(rule.Limit, per)
}

// measureOverAdmission drives nodes Async decorators on virtual time: every millisecond each
// node is offered rate/1000 units (rate a multiple of 1000 not needed: spread evenly), and
// every interval each syncs (in turn, the worst order for the first). It returns the largest
// excess over the limit admitted in any span of one period.
func measureOverAdmission(t *testing.T, shared sluice.Store, clock *sluicetest.ManualClock, rule sluice.Rule,
	interval time.Duration, nodes int, rate int64) int64 {
	t.Helper()
	ctx := context.Background()
	var ns []*Async
	for range nodes {
		ns = append(ns, newAsync(t, shared, WithClock(clock), WithManualSync(), WithInterval(interval)))
	}
	clock.Set(t0.Truncate(rule.Period))
	start := clock.Now()
	var admits []time.Duration // admission instants, relative to start
	offered := make([]int64, nodes)
	const steps = 12000 // 12 s of virtual time in 1 ms steps
	for ms := range int64(steps) {
		for i, a := range ns {
			for offered[i] < rate*(ms+1)/1000 {
				offered[i]++
				d, err := a.Take(ctx, sluice.Request{Key: "shared", Rule: rule, N: 1})
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admits = append(admits, clock.Now().Sub(start))
				}
			}
		}
		clock.Advance(time.Millisecond)
		if clock.Now().Sub(start)%interval == 0 {
			for _, a := range ns {
				if err := a.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return worstExcess(admits, rule)
}

// worstExcess is the largest count of admissions minus the limit in any fixed window (for
// fixed-window rules) or any span of one period (for sliding windows).
func worstExcess(admits []time.Duration, rule sluice.Rule) int64 {
	var worst int64
	if rule.Algorithm == sluice.AlgorithmFixedWindow {
		counts := map[time.Duration]int64{}
		for _, at := range admits {
			counts[at.Truncate(rule.Period)]++
		}
		for _, c := range counts {
			worst = max(worst, c-rule.Limit)
		}
		return worst
	}
	j := 0
	for i := range admits {
		for admits[i]-admits[j] >= rule.Period {
			j++
		}
		worst = max(worst, int64(i-j+1)-rule.Limit)
	}
	return worst
}
