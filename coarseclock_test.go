package sluice_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestCoarseClockTracksRealTime reads the coarse clock until it has moved at least 5 ms (at
// most 5 s of real time) and checks it never runs backwards and never leads the precise clock.
// How far it may lag depends on the scheduler (a loaded CI machine can starve the refreshing
// goroutine for a while), so the lag bound is generous: this checks the clock moves, not its
// resolution.
func TestCoarseClockTracksRealTime(t *testing.T) {
	var c sluice.CoarseClock
	var sys sluice.SystemClock
	first := c.UnixNano()
	prev := first
	deadline := time.Now().Add(5 * time.Second)
	for prev-first < int64(5*time.Millisecond) && time.Now().Before(deadline) {
		got := c.UnixNano()
		if got < prev {
			t.Fatalf("coarse clock ran backwards by %v", time.Duration(prev-got))
		}
		if lead := got - sys.UnixNano(); lead > 0 {
			t.Fatalf("coarse clock leads the system clock by %v", time.Duration(lead))
		}
		prev = got
	}
	if prev-first < int64(5*time.Millisecond) {
		t.Fatalf("coarse clock moved %v in 5 s", time.Duration(prev-first))
	}
	if lag := time.Duration(sys.UnixNano() - c.UnixNano()); lag > time.Second {
		t.Errorf("coarse clock lags by %v", lag)
	}
	if d := c.Now().Sub(sys.Now()); d > 0 || d < -time.Second {
		t.Errorf("Now differs from the system clock by %v", d)
	}
}
