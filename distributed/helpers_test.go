package distributed

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// flakyStore is a hand-written fake around the memory store that fails (or hangs) on demand
// and counts calls.
type flakyStore struct {
	*memory.Store
	fail  atomic.Bool
	hang  atomic.Bool
	calls atomic.Int64
}

func (f *flakyStore) check(ctx context.Context) error {
	f.calls.Add(1)
	if f.hang.Load() {
		<-ctx.Done()
		return fmt.Errorf("flaky: %w: %w", sluice.ErrStoreUnavailable, ctx.Err())
	}
	if f.fail.Load() {
		return fmt.Errorf("flaky: %w: connection refused", sluice.ErrStoreUnavailable)
	}
	return nil
}

func (f *flakyStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if err := f.check(ctx); err != nil {
		return sluice.Decision{}, err
	}
	return f.Store.Take(ctx, req)
}

func (f *flakyStore) AddWindowCounts(ctx context.Context, batch []sluice.WindowCounts) error {
	if err := f.check(ctx); err != nil {
		return err
	}
	return f.Store.AddWindowCounts(ctx, batch)
}

func (f *flakyStore) Heartbeat(ctx context.Context, group, instance string, ttl time.Duration) (int, error) {
	if err := f.check(ctx); err != nil {
		return 0, err
	}
	return f.Store.Heartbeat(ctx, group, instance, ttl)
}
