package memory

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// Instances that start at the same instant each learn, at their first heartbeat, only the
// instances that announced themselves before them (1, 2, ..., N): no registry can count an
// instance that has not announced itself yet. From their second heartbeat on (one heartbeat
// interval later, or at the same instant) every one of them sees all N, and an instance that
// stops beating leaves the count exactly when its TTL runs out.
func TestHeartbeatSameInstant(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	clock := sluicetest.NewManualClock(t0)
	s, err := New(WithClock(clock), WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	const n, ttl = 5, 3 * time.Second
	beat := func(i int) int {
		t.Helper()
		live, err := s.Heartbeat(ctx, "g", fmt.Sprint("i", i), ttl)
		if err != nil {
			t.Fatal(err)
		}
		return live
	}
	for i := range n {
		if got := beat(i); got != i+1 {
			t.Fatalf("first heartbeat of instance %d: %d live, want %d", i, got, i+1)
		}
	}
	for i := range n { // the same instant again
		if got := beat(i); got != n {
			t.Fatalf("second heartbeat of instance %d at the same instant: %d live, want %d", i, got, n)
		}
	}
	clock.Advance(time.Second)
	for i := range n - 1 { // instance n-1 stops beating
		if got := beat(i); got != n {
			t.Fatalf("instance %d after 1s: %d live, want %d", i, got, n)
		}
	}
	clock.Advance(ttl - time.Second - time.Nanosecond) // 1ns before instance n-1 expires
	if got := beat(0); got != n {
		t.Fatalf("1ns before the silent instance's TTL: %d live, want %d", got, n)
	}
	clock.Advance(time.Nanosecond)
	if got := beat(0); got != n-1 {
		t.Fatalf("at the silent instance's TTL: %d live, want %d", got, n-1)
	}
	if got := beat(n - 1); got != n { // it comes back
		t.Fatalf("the silent instance back: %d live, want %d", got, n)
	}
	if _, err := s.Heartbeat(ctx, "other", "i0", ttl); err != nil {
		t.Fatal(err)
	}
	if got := beat(0); got != n {
		t.Fatalf("another group changed the count: %d", got)
	}
	if _, err := s.Heartbeat(ctx, "g", "", ttl); !errors.Is(err, sluice.ErrInvalidKey) {
		t.Fatalf("empty instance: %v", err)
	}
	if _, err := s.Heartbeat(ctx, "g", "x", 0); !errors.Is(err, sluice.ErrInvalidRule) {
		t.Fatalf("zero ttl: %v", err)
	}
}
