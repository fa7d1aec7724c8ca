package distributed

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestDecoratorLeases: every decorator passes the lease conformance suite over a memory store.
func TestDecoratorLeases(t *testing.T) {
	for name, wrap := range map[string]func(sluice.Store, sluice.Clock) (sluice.Store, error){
		"OverLimit": func(s sluice.Store, c sluice.Clock) (sluice.Store, error) { return NewOverLimit(s, WithClock(c)) },
		"Async": func(s sluice.Store, c sluice.Clock) (sluice.Store, error) {
			return NewAsync(s, WithClock(c), WithManualSync())
		},
		"Fallback": func(s sluice.Store, c sluice.Clock) (sluice.Store, error) {
			return NewFallback(s, WithClock(c), WithManualProbe())
		},
	} {
		t.Run(name, func(t *testing.T) {
			storetest.RunLeases(t, func(t *testing.T, clock sluice.Clock) sluice.Store {
				d, err := wrap(newMemory(t, clock), clock)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = d.(sluice.Closer).Close() })
				return d
			})
		})
	}
	if _, err := (&OverLimit{next: &sluicetest.Recorder{}}).AcquireLease(context.Background(), sluice.LeaseRequest{}); !errors.Is(err, sluice.ErrNoLeaser) {
		t.Errorf("over a store without leases: %v", err)
	}
}

// failingLeaser is a memory store whose leases fail while down, as a store server's would. It
// counts no instances (no Heartbeat): the fleet's size is WithInstances'.
type failingLeaser struct {
	mem  *memory.Store
	down atomic.Bool
}

func (f *failingLeaser) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	return f.mem.Take(ctx, req)
}

var errDown = fmt.Errorf("test: %w", sluice.ErrStoreUnavailable)

func (f *failingLeaser) AcquireLease(ctx context.Context, req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	if f.down.Load() {
		return sluice.LeaseDecision{}, errDown
	}
	return f.mem.AcquireLease(ctx, req)
}

func (f *failingLeaser) RenewLeases(ctx context.Context, batch []sluice.LeaseRenewal) error {
	if f.down.Load() {
		return errDown
	}
	return f.mem.RenewLeases(ctx, batch)
}

func (f *failingLeaser) ReleaseLease(ctx context.Context, key string, id sluice.LeaseID) error {
	if f.down.Load() {
		return errDown
	}
	return f.mem.ReleaseLease(ctx, key, id)
}

// TestFallbackLeaseBudget: while the store is down, three instances together hold at most the
// limit: each grants up to its share (limit / 3), counting the slots it already held in the
// store; local slots are renewed and released locally.
func TestFallbackLeaseBudget(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	store := &failingLeaser{mem: newMemory(t, clock)}
	limit := sluice.InFlight{Limit: 9, Lease: time.Minute}
	ctx := context.Background()
	var fleet []*Fallback
	for i := range 3 {
		f, err := NewFallback(store, WithClock(clock), WithManualProbe(), WithInstances(3), WithFailures(1), WithInstanceID(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		fleet = append(fleet, f)
	}
	var next byte
	acquire := func(f *Fallback) (sluice.LeaseID, sluice.LeaseDecision) {
		t.Helper()
		next++
		id := sluice.LeaseID{next}
		d, err := f.AcquireLease(ctx, sluice.LeaseRequest{Key: "k", InFlight: limit, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return id, d
	}
	before1, _ := acquire(fleet[0])
	acquire(fleet[0]) // two slots in the store before the outage
	store.down.Store(true)
	var held [3]int
	var local []sluice.LeaseID
	for i, f := range fleet {
		for range 10 {
			id, d := acquire(f)
			if d.Admitted {
				held[i]++
				local = append(local, id)
			}
		}
	}
	if held != [3]int{1, 3, 3} || fleet[0].Circuit() != CircuitOpen {
		t.Fatalf("granted during the outage %v (circuit %v), want [1 3 3]: 3 each, less the 2 instance 0 held", held, fleet[0].Circuit())
	}
	batch := []sluice.LeaseRenewal{{Key: "k", ID: local[0], Lease: time.Minute}, {Key: "k", ID: before1, Lease: time.Minute}}
	if err := fleet[0].RenewLeases(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if !batch[0].Held || batch[0].Err != nil || batch[1].Held || !sluice.IsUnavailable(batch[1].Err) {
		t.Errorf("renewal in the outage: local %+v, store %+v; want the local held, the store's failed", batch[0], batch[1])
	}
	if err := fleet[1].ReleaseLease(ctx, "k", local[1]); err != nil {
		t.Fatal(err)
	}
	if _, d := acquire(fleet[1]); !d.Admitted {
		t.Error("a slot released locally did not come back")
	}
	if _, d := acquire(fleet[1]); d.Admitted {
		t.Error("past the share after a release")
	}
	clock.Advance(time.Minute)
	if _, d := acquire(fleet[2]); !d.Admitted {
		t.Error("expired local slots did not come back")
	}
}
