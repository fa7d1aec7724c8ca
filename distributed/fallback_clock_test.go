package distributed

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// With WithManualProbe the caller drives probes and heartbeats on the Fallback's clock: no
// store call happens in the background, the circuit closes only when Probe finds the store
// back, and heartbeats are sent when due on the clock.
func TestFallbackManualProbe(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	flaky := sluicetest.NewFlakyStore(newMemory(t, clock))
	log := &stateLog{}
	f, err := NewFallback(flaky, WithClock(clock), WithManualProbe(), WithFailures(1),
		WithHeartbeat(time.Second), OnCircuitChange(log.record))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	rule := sluice.FixedWindow(10, time.Minute)
	take := func() sluice.Decision {
		t.Helper()
		d, err := f.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if got := flaky.Calls(); got != 1 {
		t.Fatalf("%d store calls after NewFallback, want 1 (the first heartbeat)", got)
	}
	// Heartbeats: not due before a heartbeat interval of the clock, due after.
	clock.Advance(999 * time.Millisecond)
	if err := f.Probe(ctx); err != nil || flaky.Calls() != 1 {
		t.Fatalf("Probe before the heartbeat is due: %v, %d calls", err, flaky.Calls())
	}
	clock.Advance(time.Millisecond)
	if err := f.Probe(ctx); err != nil || flaky.Calls() != 2 {
		t.Fatalf("Probe when the heartbeat is due: %v, %d calls", err, flaky.Calls())
	}
	flaky.SetFailing(true)
	take()
	if f.Circuit() != CircuitOpen {
		t.Fatal("a failure did not open the circuit")
	}
	calls := flaky.Calls()
	for range 5 {
		take()
	}
	time.Sleep(20 * time.Millisecond) // real time passes: nothing may probe in the background
	if got := flaky.Calls(); got != calls {
		t.Fatalf("%d store calls while open without Probe, want 0", got-calls)
	}
	if err := f.Probe(ctx); err == nil || f.Circuit() != CircuitOpen {
		t.Fatalf("Probe with the store down: %v, state %v", err, f.Circuit())
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
	if got := log.get(); len(got) != 2 || got[0] != CircuitOpen || got[1] != CircuitClosed {
		t.Fatalf("circuit changes %v, want fallback then store", got)
	}
	f.Close()
	if err := f.Probe(ctx); err == nil {
		t.Fatal("Probe after Close succeeded")
	}
}

// Without WithManualProbe an open circuit probes on the Fallback's clock: a ManualClock that
// does not move means no probe, however much real time passes.
func TestFallbackProbesOnItsClock(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	flaky := sluicetest.NewFlakyStore(newMemory(t, clock))
	f, err := NewFallback(flaky, WithClock(clock), WithFailures(1),
		WithProbeInterval(100*time.Millisecond), WithHeartbeat(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flaky.SetFailing(true)
	if _, err := f.Take(context.Background(), sluice.Request{Key: "k", Rule: sluice.FixedWindow(5, time.Minute), N: 1}); err != nil {
		t.Fatal(err)
	}
	flaky.SetFailing(false)
	calls := flaky.Calls()
	time.Sleep(300 * time.Millisecond) // three probe intervals of real time
	if got := flaky.Calls(); got != calls || f.Circuit() != CircuitOpen {
		t.Fatalf("%d probes while the clock stood still (state %v), want none", got-calls, f.Circuit())
	}
	waitFor(t, time.Second, "the probe and heartbeat loops waiting on the clock", func() bool { return clock.Waiters() >= 2 })
	// The first probe on the clock's interval writes back; the next goes back to the store.
	clock.Advance(100 * time.Millisecond)
	waitFor(t, 2*time.Second, "the probe on the clock's interval", func() bool { return flaky.Calls() > calls })
	if f.Circuit() != CircuitOpen {
		t.Fatalf("state %v after the first probe that found the store back, want fallback for one more interval", f.Circuit())
	}
	waitFor(t, time.Second, "the probe loop waiting on the clock again", func() bool { return clock.Waiters() >= 2 })
	clock.Advance(100 * time.Millisecond)
	waitFor(t, 2*time.Second, "the second probe on the clock's interval", func() bool { return f.Circuit() == CircuitClosed })
}

// The healthy path makes the store call in the caller's goroutine under a deadline: a store
// that blocks until its context ends is cut off at the timeout, and opens the circuit.
func TestFallbackTimeoutIsRealTime(t *testing.T) {
	clock := sluicetest.NewManualClock(t0) // virtual time does not bound the call; the deadline does
	flaky := sluicetest.NewFlakyStore(newMemory(t, clock))
	f, err := NewFallback(flaky, WithClock(clock), WithTimeout(20*time.Millisecond), WithManualProbe())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flaky.SetHanging(true)
	start := time.Now()
	d, err := f.Take(context.Background(), sluice.Request{Key: "k", Rule: sluice.FixedWindow(5, time.Minute), N: 1})
	if el := time.Since(start); err != nil || !d.Allowed || el > time.Second {
		t.Fatalf("hanging store: %+v %v after %v", d, err, el)
	}
	if f.Circuit() != CircuitOpen {
		t.Fatal("a timeout did not open the circuit")
	}
}

// Instances that lost the store at different instants probe at the same instants of their
// (agreeing) clocks, so they write back at the same probe and switch back to the store
// together: probing at intervals counted from each one's own outage, the first back would
// spend the store's refill while the others still spent their local shares. Here A opens
// 30 ms and B 70 ms after a multiple of the 100 ms probe interval; both go back to the store
// at the same instant (at intervals counted from their outages: 230 and 270 ms).
func TestFallbackProbesAligned(t *testing.T) {
	clock := sluicetest.NewManualClock(t0) // t0 is a multiple of the probe interval
	const probe = 100 * time.Millisecond
	var mu sync.Mutex
	back := map[int]time.Time{}
	var fbs [2]*Fallback
	var flakies [2]*sluicetest.FlakyStore
	for i := range fbs {
		flakies[i] = sluicetest.NewFlakyStore(newMemory(t, clock))
		f, err := NewFallback(flakies[i], WithClock(clock), WithFailures(1), WithProbeInterval(probe),
			OnCircuitChange(func(_, to Circuit) {
				if to == CircuitClosed {
					mu.Lock()
					back[i] = clock.Now()
					mu.Unlock()
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		fbs[i] = f
	}
	// Each one's heartbeat loop waits on the clock too (the memory store counts instances).
	baseline := len(fbs)
	for deadline := time.Now().Add(5 * time.Second); clock.Waiters() != baseline; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters on the clock, want the %d heartbeat loops", clock.Waiters(), baseline)
		}
	}
	ctx := context.Background()
	rule := sluice.FixedWindow(10, time.Minute)
	openAt := func(i int, at time.Duration) {
		clock.Set(t0.Add(at))
		flakies[i].SetFailing(true)
		if _, err := fbs[i].Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1}); err != nil {
			t.Fatal(err)
		}
		if fbs[i].Circuit() != CircuitOpen {
			t.Fatalf("instance %d: a failure did not open the circuit", i)
		}
	}
	// settled waits (in real time) until every probe loop still running waits on the clock.
	settled := func() {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			mu.Lock()
			want := baseline + len(fbs) - len(back)
			mu.Unlock()
			if clock.Waiters() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("probe loops did not settle: %d waiters, want %d", clock.Waiters(), want)
			}
		}
	}
	openAt(0, 30*time.Millisecond)
	openAt(1, 70*time.Millisecond)
	settled()
	for i := range flakies {
		flakies[i].SetFailing(false)
	}
	for step := 0; step < 40; step++ {
		mu.Lock()
		done := len(back) == len(fbs)
		mu.Unlock()
		if done {
			break
		}
		clock.Advance(10 * time.Millisecond)
		settled()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(back) != 2 {
		t.Fatalf("instances back on the store: %v, want both", back)
	}
	if !back[0].Equal(back[1]) || !back[0].Equal(t0.Add(2*probe)) {
		t.Errorf("back on the store at +%v and +%v, want both at +%v", back[0].Sub(t0), back[1].Sub(t0), 2*probe)
	}
}
