package distributed

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// halfShareFallback returns a Fallback over a flaky memory store, on a manual clock, probed by
// hand, opening at the first failure, with half of each rule's limit while open.
func halfShareFallback(t *testing.T) (*sluicetest.ManualClock, *flakyStore, *Fallback) {
	t.Helper()
	clock := sluicetest.NewManualClock(t0)
	flaky := &flakyStore{Store: newMemory(t, clock)}
	f, err := NewFallback(flaky, WithClock(clock), WithManualProbe(), WithFailures(1), WithSafeCapacity(0.5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return clock, flaky, f
}

// TestFallbackCarriesState: when the circuit opens, the local limiter starts each key from
// the last store decision this instance saw (its share of what the store had left), not from
// a full budget, for every algorithm.
func TestFallbackCarriesState(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			_, flaky, f := halfShareFallback(t)
			ctx := context.Background()
			rule := sluice.Rule{Algorithm: a, Limit: 100, Period: time.Minute}
			d, err := f.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 90})
			if err != nil || !d.Allowed || d.Remaining != 10 {
				t.Fatalf("take 90 on the store: %+v, %v", d, err)
			}
			flaky.fail.Store(true)
			admitted := 0
			for range 100 {
				d, err := f.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1})
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
			if f.State() != StateFallback {
				t.Fatal("the circuit did not open")
			}
			// The store had 10 left; this instance's share is half: 5, not half of a full budget.
			if admitted != 5 {
				t.Errorf("admitted %d during the outage, want 5 (half of the 10 the store had left)", admitted)
			}
			// Another key, never seen on the store, starts with the instance's full share.
			admitted = 0
			for range 100 {
				if d, _ := f.Take(ctx, sluice.Request{Key: "fresh", Rule: rule, N: 1}); d.Allowed {
					admitted++
				}
			}
			if admitted != 50 {
				t.Errorf("a fresh key admitted %d during the outage, want 50", admitted)
			}
		})
	}
}

// TestFallbackWritesBack: before decisions return to the store, the outage's admissions are
// written back to it, and a store that forgot the key (a restart without persistence) gets
// back what it had consumed, so neither switch hands out a fresh budget.
func TestFallbackWritesBack(t *testing.T) {
	for _, forget := range []bool{false, true} {
		for _, a := range sluice.Algorithms() {
			name := a.String()
			if forget {
				name += "/restarted"
			}
			t.Run(name, func(t *testing.T) {
				clock, flaky, f := halfShareFallback(t)
				ctx := context.Background()
				rule := sluice.Rule{Algorithm: a, Limit: 100, Period: time.Minute}
				if d, err := f.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 80}); err != nil || !d.Allowed {
					t.Fatalf("take 80 on the store: %+v, %v", d, err)
				}
				flaky.fail.Store(true)
				for range 20 { // the local limiter admits half of the 20 left: 10
					if _, err := f.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1}); err != nil {
						t.Fatal(err)
					}
				}
				if forget {
					flaky.Store = newMemory(t, clock)
				}
				flaky.fail.Store(false)
				// The first Probe that finds the store back writes the outage back; the next one
				// (a probe interval later) goes back to the store.
				if err := f.Probe(ctx); err != nil || f.State() != StateFallback {
					t.Fatalf("first Probe with the store back: %v, state %v", err, f.State())
				}
				if err := f.Probe(ctx); err != nil || f.State() != StateStore {
					t.Fatalf("second Probe with the store back: %v, state %v", err, f.State())
				}
				d, err := flaky.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 0})
				if err != nil {
					t.Fatal(err)
				}
				if d.Remaining != 10 {
					t.Errorf("the store has %d left after the outage, want 10 (80 before, 10 admitted during)", d.Remaining)
				}
			})
		}
	}
}
