package distributed

import (
	"context"
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
	flaky := &flakyStore{Store: newMemory(t, clock)}
	log := &stateLog{}
	f, err := NewFallback(flaky, WithClock(clock), WithManualProbe(), WithFailures(1),
		WithHeartbeat(time.Second), OnStateChange(log.record))
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
	if got := flaky.calls.Load(); got != 1 {
		t.Fatalf("%d store calls after NewFallback, want 1 (the first heartbeat)", got)
	}
	// Heartbeats: not due before a heartbeat interval of the clock, due after.
	clock.Advance(999 * time.Millisecond)
	if err := f.Probe(ctx); err != nil || flaky.calls.Load() != 1 {
		t.Fatalf("Probe before the heartbeat is due: %v, %d calls", err, flaky.calls.Load())
	}
	clock.Advance(time.Millisecond)
	if err := f.Probe(ctx); err != nil || flaky.calls.Load() != 2 {
		t.Fatalf("Probe when the heartbeat is due: %v, %d calls", err, flaky.calls.Load())
	}
	flaky.fail.Store(true)
	take()
	if f.State() != StateFallback {
		t.Fatal("a failure did not open the circuit")
	}
	calls := flaky.calls.Load()
	for range 5 {
		take()
	}
	time.Sleep(20 * time.Millisecond) // real time passes: nothing may probe in the background
	if got := flaky.calls.Load(); got != calls {
		t.Fatalf("%d store calls while open without Probe, want 0", got-calls)
	}
	if err := f.Probe(ctx); err == nil || f.State() != StateFallback {
		t.Fatalf("Probe with the store down: %v, state %v", err, f.State())
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
	if got := log.get(); len(got) != 2 || got[0] != StateFallback || got[1] != StateStore {
		t.Fatalf("state changes %v, want fallback then store", got)
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
	flaky := &flakyStore{Store: newMemory(t, clock)}
	f, err := NewFallback(flaky, WithClock(clock), WithFailures(1),
		WithProbeInterval(100*time.Millisecond), WithHeartbeat(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flaky.fail.Store(true)
	if _, err := f.Take(context.Background(), sluice.Request{Key: "k", Rule: sluice.FixedWindow(5, time.Minute), N: 1}); err != nil {
		t.Fatal(err)
	}
	flaky.fail.Store(false)
	calls := flaky.calls.Load()
	time.Sleep(300 * time.Millisecond) // three probe intervals of real time
	if got := flaky.calls.Load(); got != calls || f.State() != StateFallback {
		t.Fatalf("%d probes while the clock stood still (state %v), want none", got-calls, f.State())
	}
	waitFor(t, time.Second, "the probe and heartbeat loops waiting on the clock", func() bool { return clock.Waiters() >= 2 })
	// The first probe on the clock's interval writes back; the next goes back to the store.
	clock.Advance(100 * time.Millisecond)
	waitFor(t, 2*time.Second, "the probe on the clock's interval", func() bool { return flaky.calls.Load() > calls })
	if f.State() != StateFallback {
		t.Fatalf("state %v after the first probe that found the store back, want fallback for one more interval", f.State())
	}
	waitFor(t, time.Second, "the probe loop waiting on the clock again", func() bool { return clock.Waiters() >= 2 })
	clock.Advance(100 * time.Millisecond)
	waitFor(t, 2*time.Second, "the second probe on the clock's interval", func() bool { return f.State() == StateStore })
}

// The healthy path makes the store call in the caller's goroutine under a deadline: a store
// that blocks until its context ends is cut off at the timeout, and opens the circuit.
func TestFallbackTimeoutIsRealTime(t *testing.T) {
	clock := sluicetest.NewManualClock(t0) // virtual time does not bound the call; the deadline does
	flaky := &flakyStore{Store: newMemory(t, clock)}
	f, err := NewFallback(flaky, WithClock(clock), WithTimeout(20*time.Millisecond), WithManualProbe())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flaky.hang.Store(true)
	start := time.Now()
	d, err := f.Take(context.Background(), sluice.Request{Key: "k", Rule: sluice.FixedWindow(5, time.Minute), N: 1})
	if el := time.Since(start); err != nil || !d.Allowed || el > time.Second {
		t.Fatalf("hanging store: %+v %v after %v", d, err, el)
	}
	if f.State() != StateFallback {
		t.Fatal("a timeout did not open the circuit")
	}
}
