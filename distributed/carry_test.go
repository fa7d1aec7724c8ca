package distributed

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// manualFallback returns a Fallback over a flaky memory store, on a manual clock, probed by
// hand, with opts.
func manualFallback(t *testing.T, opts ...Option) (*sluicetest.ManualClock, *sluicetest.FlakyStore, *Fallback) {
	t.Helper()
	clock := sluicetest.NewManualClock(t0)
	flaky := sluicetest.NewFlakyStore(newMemory(t, clock))
	f, err := NewFallback(flaky, append([]Option{WithClock(clock), WithManualProbe()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return clock, flaky, f
}

// halfShareFallback is a manualFallback opening at the first failure, with half of each
// rule's limit while open.
func halfShareFallback(t *testing.T) (*sluicetest.ManualClock, *sluicetest.FlakyStore, *Fallback) {
	t.Helper()
	return manualFallback(t, WithFailures(1), WithSafeCapacity(0.5))
}

// takeOne decides one unit of key "k" under rule on f.
func takeOne(t *testing.T, f *Fallback, rule sluice.Rule) sluice.Decision {
	t.Helper()
	d, err := f.Take(context.Background(), sluice.Request{Key: "k", Rule: rule, N: 1})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// backOnStore probes f twice with the store answering (the first writes the outage back, the
// second switches back) and fails unless f is then on the store.
func backOnStore(t *testing.T, f *Fallback) {
	t.Helper()
	for range 2 {
		if err := f.Probe(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if f.Circuit() != CircuitClosed {
		t.Fatalf("state %v after two Probes of a store that answers", f.Circuit())
	}
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
			flaky.SetFailing(true)
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
			if f.Circuit() != CircuitOpen {
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
				flaky.SetFailing(true)
				for range 20 { // the local limiter admits half of the 20 left: 10
					if _, err := f.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1}); err != nil {
						t.Fatal(err)
					}
				}
				if forget {
					flaky.Replace(newMemory(t, clock))
				}
				flaky.SetFailing(false)
				// The first Probe that finds the store back writes the outage back; the next one
				// (a probe interval later) goes back to the store.
				if err := f.Probe(ctx); err != nil || f.Circuit() != CircuitOpen {
					t.Fatalf("first Probe with the store back: %v, state %v", err, f.Circuit())
				}
				if err := f.Probe(ctx); err != nil || f.Circuit() != CircuitClosed {
					t.Fatalf("second Probe with the store back: %v, state %v", err, f.Circuit())
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

// TestFallbackFleetSwitches: three instances on one store, a hot key (100/s) asked 1,000
// times a second round robin, the store down for 2 s or more (failing, or restarted empty),
// probes every 100 ms at the same instants (as untilNextProbe aligns them), all on virtual
// time: no window of one second from a second before the outage admits more than the limit +
// 5% across the fleet, the switch back included (fixed window: no window of its own). Before
// the fixes the sliding window admitted 110-122 (units written back twice into one store
// window bunch the next window's admissions at its end), the buckets 199-202 (written back as
// the shadow limiter holds them, next to nothing: a full burst handed out again), and with
// probes at staggered phases (30 ms apart) the buckets 108-109 (the first instance back was
// handed the store's refill while the others still spent their shares).
func TestFallbackFleetSwitches(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		for _, c := range []struct {
			restart bool
			up      int // ms of the run when the store answers again (down at 2,000 ms)
		}{{false, 4000}, {true, 4000}, {false, 4450}, {true, 4450}, {true, 4850}} {
			name := fmt.Sprintf("%s/%s/up-at-%dms", a, map[bool]string{false: "stalled", true: "restarted"}[c.restart], c.up)
			t.Run(name, func(t *testing.T) { fleetSwitches(t, a, c.restart, c.up) })
		}
	}
}

func fleetSwitches(t *testing.T, a sluice.Algorithm, restart bool, up int) {
	clock := sluicetest.NewManualClock(t0) // the start of a second
	flaky := sluicetest.NewFlakyStore(newMemory(t, clock))
	var fleet [3]*Fallback
	for i := range fleet {
		f, err := NewFallback(flaky, WithClock(clock), WithManualProbe(), WithFailures(1), WithSafeCapacity(1.0/3))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		fleet[i] = f
	}
	ctx := context.Background()
	rule := sluice.Rule{Algorithm: a, Limit: 100, Period: time.Second}
	const down, end = 2000, 8000 // ms of the run
	var admitted []int           // ms of each admission
	for ms := range end {
		switch ms {
		case down:
			flaky.SetFailing(true)
		case up:
			if restart {
				flaky.Replace(newMemory(t, clock))
			}
			flaky.SetFailing(false)
		}
		for _, f := range fleet {
			if ms%100 == 0 { // each instance probes every 100 ms, at the same instants (untilNextProbe)
				_ = f.Probe(ctx)
			}
		}
		d, err := fleet[ms%3].Take(ctx, sluice.Request{Key: "hot", Rule: rule, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted = append(admitted, ms)
		}
		clock.Advance(time.Millisecond)
	}
	perSecond := make([]int, end/1000)
	for _, ms := range admitted {
		perSecond[ms/1000]++
	}
	worst, at, j := 0, 0, 0
	for i, ms := range admitted {
		for j < len(admitted) && admitted[j] < ms+1000 {
			j++
		}
		if ms >= down-1000 && j-i > worst && a != sluice.AlgorithmFixedWindow {
			worst, at = j-i, ms
		}
	}
	if a == sluice.AlgorithmFixedWindow {
		for s, n := range perSecond {
			if n > worst {
				worst, at = n, s*1000
			}
		}
	}
	t.Logf("%d admitted in %d ms, %v a second; most in one second: %d from %d ms (outage %d-%d ms)",
		len(admitted), end, perSecond, worst, at, down, up)
	if worst > 105 {
		t.Errorf("%d admitted in the second from %d ms, want at most the limit + 5%% (105)", worst, at)
	}
}

// TestFallbackWritesBackOnce: a key's units are written back once. With a sliding window, a
// write-back of what the outage weighs (the previous window's units weighted by the part of
// them still inside the period) followed by a failed probe, more local admissions and a second
// write-back leaves the store with what the outage weighs then, not the previous window's
// units a second time.
func TestFallbackWritesBackOnce(t *testing.T) {
	clock, flaky, f := manualFallback(t, WithFailures(1), WithSafeCapacity(1)) // t0: the start of a window
	ctx := context.Background()
	rule := sluice.SlidingWindow(100, time.Second, 1)
	take := func(n int) {
		t.Helper()
		for range n {
			if d := takeOne(t, f, rule); !d.Allowed {
				t.Fatalf("local take: %+v", d)
			}
		}
	}
	flaky.SetFailing(true)
	take(40)                               // 40 in the first window
	clock.Advance(1500 * time.Millisecond) // half of them still inside the period: 20
	flaky.Replace(newMemory(t, clock))     // restarted empty
	flaky.SetFailing(false)
	if err := f.Probe(ctx); err != nil || f.Circuit() != CircuitOpen {
		t.Fatalf("first Probe: %v, %v", err, f.Circuit()) // writes back 20
	}
	flaky.SetFailing(true)
	if err := f.Probe(ctx); err == nil {
		t.Fatal("a Probe of a failing store succeeded")
	}
	take(10)
	flaky.SetFailing(false)
	backOnStore(t, f)
	d, err := flaky.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 0})
	if err != nil {
		t.Fatal(err)
	}
	// The outage weighs 20 + 10 = 30 now; without emptying the shadow limiter after the first
	// write-back, the 20 of the first window left in it were written again (40).
	if used := d.Capacity - d.Remaining; used != 30 {
		t.Errorf("the store holds %d after the outage, want 30", used)
	}
}

// TestFallbackStartsFromTheLastDecision: a decision by policy before the circuit opens (the
// first failures of WithFailures) starts the key from the store's last decision too, not from
// what the local limiter kept of an earlier outage.
func TestFallbackStartsFromTheLastDecision(t *testing.T) {
	clock, flaky, f := manualFallback(t, WithFailures(3), WithSafeCapacity(0.5))
	rule := sluice.FixedWindow(100, time.Minute)
	flaky.SetFailing(true)
	for range 10 { // the third failure opens the circuit; all 10 admitted locally
		takeOne(t, f, rule)
	}
	clock.Advance(time.Minute) // a new window: nothing of the outage is owed to it
	flaky.SetFailing(false)
	backOnStore(t, f)
	for range 100 {
		takeOne(t, f, rule) // the store's window: spent
	}
	flaky.SetFailing(true)
	if d := takeOne(t, f, rule); d.Allowed { // the circuit is still closed: decided by policy
		t.Errorf("the first failure after the store spent the key: %+v, want denied (the store had 0 left)", d)
	}
}
