package sluicetest_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

var _ sluice.Clock = (*sluicetest.ManualClock)(nil)

func TestManualClock(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := sluicetest.NewManualClock(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	now := c.After(0)
	select {
	case <-now:
	default:
		t.Fatal("After(0) did not fire at once")
	}
	later := c.After(time.Second)
	if c.Waiters() != 1 {
		t.Fatalf("Waiters = %d, want 1", c.Waiters())
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-later:
		t.Fatal("After(1s) fired after 999ms")
	default:
	}
	c.Advance(time.Millisecond)
	select {
	case at := <-later:
		if !at.Equal(t0.Add(time.Second)) {
			t.Fatalf("After(1s) fired with %v, want %v", at, t0.Add(time.Second))
		}
	default:
		t.Fatal("After(1s) did not fire at +1s")
	}
	if c.Waiters() != 0 {
		t.Fatalf("Waiters = %d after firing, want 0", c.Waiters())
	}
	c.Set(t0.Add(-time.Hour)) // backwards is allowed: tests of clock jumps need it
	if got := c.Now(); !got.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("Now after Set backwards = %v", got)
	}
}
