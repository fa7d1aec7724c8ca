package memcached_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memcached"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/storetest"
)

// changeRule returns a new rule for a key under r: any rule for the CAS algorithms; for the
// counter algorithms one with the same windows (a new limit), since a change of period or
// sub-window count starts from the new windows' counters here (see the package doc).
func changeRule(rng *rand.Rand, r sluice.Rule) sluice.Rule {
	for {
		n := storetest.RandomRule(rng, r.Algorithm)
		if r.Algorithm == sluice.AlgorithmFixedWindow || r.Algorithm == sluice.AlgorithmSlidingWindow {
			n.Period, n.SubWindows = r.Period, r.SubWindows
		}
		if n.Validate() == nil {
			return n
		}
	}
}

// TestDifferential drives the memcached store and the memory store (the reference) with the
// same random requests at whole-millisecond instants of one manual clock, clock steps back
// included, and wants the same decisions. Each key gets fresh stores, since a store's window
// counters follow the latest instant it has read, for every key.
//
// The clock steps back only for the CAS algorithms, whose state is the memory store's own. The
// window counters are named by the latest instant the store has read, while the memory store
// keeps a key's newest window only as long as it keeps the key (not after a peek on an absent
// key, nor after its sweep), so after a step back the two may decide in different windows
// (both never in one earlier than a window that still counts units). The conformance tables
// step the clock back on counters; TestClockBackKeepsWindow checks the clamp.
func TestDifferential(t *testing.T) {
	addr := server(t)
	rng := storetest.Rand(t, 2)
	keys, steps := 25, 100
	if testing.Short() {
		keys, steps = 8, 50
	}
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			for k := 0; k < keys; k++ {
				clock := sluicetest.NewManualClock(t0.Add(time.Duration(rng.Int64N(1000)) * time.Millisecond))
				mc := newStore(t, []string{addr}, memcached.WithClock(clock))
				ms, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("k%d {%d}", k, k) // a space: hashed on memcached
				r := storetest.RandomRule(rng, a)
				diff := storetest.Differential{Ref: ms, Store: mc}
				for i := 0; i < steps; i++ {
					if rng.IntN(40) == 0 {
						r = changeRule(rng, r)
					}
					step := storetest.RandomStep(rng, r)
					if step < 0 && !a.Bucket() && a != sluice.AlgorithmSlidingLog {
						step = -step // see the test's doc
					}
					clock.Advance(step)
					diff.Step(t, clock.Now().Sub(t0), storetest.RandomRequest(rng, key, r))
				}
				_ = ms.Close()
			}
		})
	}
}

// TestDifferentialBudget is TestDifferential for budget steps, decided in a gets/cas round on
// the key's state item for every algorithm (the window algorithms' too), mixed with a plain
// request one step in four for the CAS algorithms (a window's plain requests read its counters,
// apart from a budget's state). The clock only moves forward, as in the Redis store's
// TestDifferentialBudget (which says why).
func TestDifferentialBudget(t *testing.T) {
	addr := server(t)
	rng := storetest.Rand(t, 3)
	keys, steps := 20, 100
	if testing.Short() {
		keys, steps = 6, 50
	}
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			for k := 0; k < keys; k++ {
				clock := sluicetest.NewManualClock(t0.Add(time.Duration(rng.Int64N(1000)) * time.Millisecond))
				mc := newStore(t, []string{addr}, memcached.WithClock(clock))
				ms, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("b%d {%d}", k, k)
				r := storetest.RandomRule(rng, a)
				diff := storetest.Differential{Ref: ms, Store: mc}
				var gen storetest.BudgetSteps
				for i := 0; i < steps; i++ {
					clock.Advance(max(0, storetest.RandomStep(rng, r)))
					req := gen.Next(rng, key, r)
					if rng.IntN(4) == 0 && (a.Bucket() || a == sluice.AlgorithmSlidingLog) {
						req = storetest.RandomRequest(rng, key, r)
					}
					diff.Step(t, clock.Now().Sub(t0), req)
				}
				_ = ms.Close()
			}
		})
	}
}

// TestAlgorithmSwitch: a key decided under another algorithm starts from full, as in memory.
func TestAlgorithmSwitch(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	s := newStore(t, []string{server(t)}, memcached.WithClock(clock))
	algs := sluice.Algorithms()
	for i := 0; i < 3*len(algs); i++ {
		r := sluice.Rule{Algorithm: algs[(i*5)%len(algs)], Limit: 3, Period: time.Second}
		clock.Advance(time.Second) // the window counters of one period are shared by both window algorithms
		d, err := s.Take(context.Background(), sluice.Request{Key: "k", Rule: r, N: 2})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed || d.Remaining != 1 {
			t.Fatalf("%s after a switch: %+v, want allowed with 1 remaining", r.Algorithm, d)
		}
	}
}

// TestClockBackKeepsWindow: a clock stepping back into an earlier window, even one whose
// counters hold nothing, keeps counting in the latest window: the units counted there stay
// counted.
func TestClockBackKeepsWindow(t *testing.T) {
	ctx := context.Background()
	for _, r := range []sluice.Rule{sluice.FixedWindow(3, time.Second), sluice.SlidingWindow(3, time.Second, 4)} {
		clock := sluicetest.NewManualClock(t0)
		s := newStore(t, []string{server(t)}, memcached.WithClock(clock))
		clock.Advance(5 * time.Second)
		if d, err := s.Take(ctx, sluice.Request{Key: "k", Rule: r, N: 3}); err != nil || !d.Allowed {
			t.Fatalf("%s: take 3: %+v, %v", r, d, err)
		}
		clock.Advance(-3 * time.Second)
		d, err := s.Take(ctx, sluice.Request{Key: "k", Rule: r, N: 1})
		if err != nil || d.Allowed || d.Remaining != 0 {
			t.Errorf("%s: 3 s back, 1 more: %+v, %v; want denied: the latest window's units still count", r, d, err)
		}
	}
}
