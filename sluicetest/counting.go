package sluicetest

import (
	"context"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// CountingStore is a sluice.Store that passes every Take to Store and counts them, for tests
// of how many decisions reach a store (a layer that caches denials or decides locally should
// save calls). Set Store before the first call; it is safe for concurrent use.
type CountingStore struct {
	sluice.Store
	calls atomic.Int64
}

// Take counts the call and passes it to Store.
func (c *CountingStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	c.calls.Add(1)
	return c.Store.Take(ctx, req)
}

// Calls reports how many Take calls were made so far.
func (c *CountingStore) Calls() int64 { return c.calls.Load() }
