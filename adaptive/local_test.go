package adaptive_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/sluicetest"
)

// Local admits up to the limit, refuses past it, and reports each round trip measured on its
// clock: once round trips slow down with the gate full, it admits fewer.
func TestLocalGate(t *testing.T) {
	clock := sluicetest.NewManualClock(time.Unix(0, 0))
	g := newGradient(t, adaptive.Settings{Initial: 20, Floor: 2, Ceiling: 20, Queue: 1})
	l := adaptive.NewLocal(g, clock)
	round := func(rtt time.Duration) int {
		var starts []time.Time
		for {
			start, ok := l.Acquire()
			if !ok {
				break
			}
			starts = append(starts, start)
		}
		clock.Advance(rtt)
		for _, s := range starts {
			l.Release(s)
		}
		return len(starts)
	}
	for range 20 {
		if n := round(10 * time.Millisecond); n != 20 {
			t.Fatalf("admitted %d at a steady latency, want the ceiling 20", n)
		}
	}
	if l.InFlight() != 0 {
		t.Fatalf("in flight %d after every release", l.InFlight())
	}
	var n int
	for range 10 {
		n = round(200 * time.Millisecond)
	}
	if n >= 10 {
		t.Errorf("admitted %d a round after round trips went from 10 ms to 200 ms, want under 10", n)
	}
	if _, ok := l.Acquire(); !ok {
		t.Error("refused with nothing in flight")
	}
}
