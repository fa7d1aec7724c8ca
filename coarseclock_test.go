package sluice_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestCoarseClockTracksRealTime reads the coarse clock for a bounded 20 ms and checks it never
// runs backwards and never leads the precise clock. How far it may lag depends on the
// scheduler, so the lag bound is generous: this checks the clock moves, not its resolution.
func TestCoarseClockTracksRealTime(t *testing.T) {
	var c sluice.CoarseClock
	var sys sluice.SystemClock
	first := c.UnixNano()
	prev := first
	deadline := time.Now().Add(20 * time.Millisecond)
	for time.Now().Before(deadline) {
		got := c.UnixNano()
		if got < prev {
			t.Fatalf("coarse clock ran backwards by %v", time.Duration(prev-got))
		}
		if lead := got - sys.UnixNano(); lead > 0 {
			t.Fatalf("coarse clock leads the system clock by %v", time.Duration(lead))
		}
		prev = got
	}
	if prev == first {
		t.Fatal("coarse clock did not move in 20 ms")
	}
	if lag := time.Duration(sys.UnixNano() - c.UnixNano()); lag > time.Second {
		t.Errorf("coarse clock lags by %v", lag)
	}
	if d := c.Now().Sub(sys.Now()); d > 0 || d < -time.Second {
		t.Errorf("Now differs from the system clock by %v", d)
	}
}
