package sluicetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// SharedStore is a store that instances share, as package distributed's decorators use one:
// it decides (Take), counts windows for Async (sluice.WindowCounter) and counts live instances
// for Fallback (sluice.Heartbeater), as the memory and Redis stores do.
type SharedStore interface {
	sluice.Store
	sluice.WindowCounter
	sluice.Heartbeater
}

// FlakyStore is a SharedStore in front of another that fails or hangs on demand, as a store
// server does when it is down or unreachable, and counts the calls that reach it (failed ones
// included), for tests of how a layer rides out an outage. While hanging (SetHanging), every
// call waits for its context to end and fails; else while failing (SetFailing), every call
// fails at once; both errors wrap sluice.ErrStoreUnavailable. Replace swaps the store behind
// it, as a server that restarts empty. It is safe for concurrent use.
type FlakyStore struct {
	mu    sync.RWMutex
	store SharedStore

	fail, hang atomic.Bool
	calls      atomic.Int64
}

// NewFlakyStore returns a FlakyStore in front of store, answering.
func NewFlakyStore(store SharedStore) *FlakyStore { return &FlakyStore{store: store} }

// SetFailing makes every call fail at once (a refused connection), or answer again.
func (f *FlakyStore) SetFailing(on bool) { f.fail.Store(on) }

// SetHanging makes every call wait until its context ends, then fail (a black hole), or
// answer again.
func (f *FlakyStore) SetHanging(on bool) { f.hang.Store(on) }

// Calls reports how many calls (Take, AddWindowCounts, Heartbeat) were made so far.
func (f *FlakyStore) Calls() int64 { return f.calls.Load() }

// Replace puts store behind f for the calls that follow.
func (f *FlakyStore) Replace(store SharedStore) {
	f.mu.Lock()
	f.store = store
	f.mu.Unlock()
}

// check counts a call and returns the store to pass it to, or the failure to return.
func (f *FlakyStore) check(ctx context.Context) (SharedStore, error) {
	f.calls.Add(1)
	if f.hang.Load() {
		<-ctx.Done()
		return nil, fmt.Errorf("sluicetest: flaky store: %w: %w", sluice.ErrStoreUnavailable, ctx.Err())
	}
	if f.fail.Load() {
		return nil, fmt.Errorf("sluicetest: flaky store: %w: connection refused", sluice.ErrStoreUnavailable)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.store, nil
}

// Take implements sluice.Store.
func (f *FlakyStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	s, err := f.check(ctx)
	if err != nil {
		return sluice.Decision{}, err
	}
	return s.Take(ctx, req)
}

// AddWindowCounts implements sluice.WindowCounter.
func (f *FlakyStore) AddWindowCounts(ctx context.Context, batch []sluice.WindowCounts) error {
	s, err := f.check(ctx)
	if err != nil {
		return err
	}
	return s.AddWindowCounts(ctx, batch)
}

// Heartbeat implements sluice.Heartbeater.
func (f *FlakyStore) Heartbeat(ctx context.Context, group, instance string, ttl time.Duration) (int, error) {
	s, err := f.check(ctx)
	if err != nil {
		return 0, err
	}
	return s.Heartbeat(ctx, group, instance, ttl)
}
