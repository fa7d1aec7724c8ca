package inflight_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/inflight"
	"github.com/sluicehq/sluice/store/memory"
)

// A request holds all its slots or none: when its second claim is refused, its first is given
// back; the refusal's Retry-After is capped at a second; Release is idempotent and tells an
// adaptive limit the round trip.
func TestAcquireAllOrNone(t *testing.T) {
	mem, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	l := sluice.NewLeases(mem)
	defer l.Close()
	ctx := context.Background()
	held, err := l.Acquire(ctx, "b", sluice.InFlight{Limit: 1, Lease: time.Minute})
	if err != nil || !held.Admitted {
		t.Fatal(held, err)
	}
	grad, _ := adaptive.NewGradient(adaptive.Settings{Initial: 5})
	claims := []inflight.Claim{{Name: "a", Key: "a", InFlight: sluice.InFlight{}, Adaptive: grad},
		{Name: "b", Key: "b", InFlight: sluice.InFlight{Limit: 1, Lease: time.Minute}}}
	i, err := inflight.Acquire(ctx, l, claims)
	if i != 1 || err != nil {
		t.Fatalf("Acquire = %d, %v; want the second claim refused", i, err)
	}
	if n := l.Held(); n != 1 {
		t.Errorf("%d leases held after a refusal, want only the one held before", n)
	}
	d := claims[1].Decision()
	if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > inflight.MaxRetry || d.Capacity != 1 || !claims[0].Overload() || claims[1].Overload() {
		t.Errorf("refusal: %+v", d)
	}
	_ = held.Release()
	if i, err := inflight.Acquire(ctx, l, claims); i != -1 || err != nil || l.Held() != 2 {
		t.Fatalf("Acquire = %d, %v with %d held", i, err, l.Held())
	}
	for range 2 {
		inflight.Release(claims, 10*time.Millisecond)
	}
	if n := l.Held(); n != 0 {
		t.Errorf("%d leases held after Release", n)
	}
}
