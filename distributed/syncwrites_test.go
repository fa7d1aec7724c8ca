package distributed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// Write-through: admissions reach the store at once, denials never touch it, and another
// instance sees the admissions at its next read.
func TestAsyncSyncWrites(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	shared := sluicetest.NewFlakyStore(newMemory(t, clock))
	a := newAsync(t, shared, WithClock(clock), WithManualSync(), WithSyncWrites())
	b := newAsync(t, shared, WithClock(clock), WithManualSync(), WithSyncWrites())
	ctx := context.Background()
	rule := sluice.SlidingWindow(10, time.Minute, 2)
	req := sluice.Request{Key: "k", Rule: rule, N: 1}
	for i := range 10 {
		if d, err := a.Take(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("take %d: %+v %v", i, d, err)
		}
	}
	if got := shared.Calls(); got != 10 {
		t.Fatalf("10 admissions made %d store calls, want 10", got)
	}
	for range 100 {
		if d, _ := a.Take(ctx, req); d.Allowed {
			t.Fatal("admitted over the limit")
		}
	}
	if got := shared.Calls(); got != 10 {
		t.Fatalf("denials made %d store calls", got-10)
	}
	b.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 0})
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := b.Take(ctx, req); d.Allowed {
		t.Fatalf("b admitted after reading a's 10: %+v", d)
	}
	shared.SetFailing(true)
	clock.Advance(2 * time.Minute)
	if _, err := a.Take(ctx, req); !errors.Is(err, sluice.ErrStoreUnavailable) {
		t.Fatalf("write-through against a failing store: %v", err)
	}
	shared.SetFailing(false)
	if d, err := a.Take(ctx, req); err != nil || d.Remaining != 9 {
		t.Fatalf("after a failed write (not counted): %+v %v, want remaining 9", d, err)
	}
}
