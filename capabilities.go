package sluice

import (
	"context"
	"time"
)

// The optional capabilities of a Store. A store or decorator implements Store.Take and, beside
// it, whichever of these it can do; code that needs one asks with a type assertion
// (`if f, ok := store.(sluice.Flusher); ok`). Decorators pass Flush and Close on to the store
// they wrap. Each interface is named after its one method.

// Closer is implemented by stores and decorators that hold resources or pending state.
// Close flushes what is pending and releases resources.
type Closer interface {
	Close() error
}

// Flusher is implemented by decorators (and stores) that hold pending state: Flush pushes it
// into the wrapped store, then flushes that store in turn.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Syncer is implemented by decorators that synchronise with the shared store at an interval
// (distributed.Async). Sync runs one synchronisation now; the simulator calls it on virtual
// time instead of the decorator's own ticker.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Prober is implemented by decorators that probe a failed store and announce themselves in
// the background (distributed.Fallback). Probe runs one probe and heartbeat now; with
// distributed.WithManualProbe the caller (the simulator, on virtual time) is the only one.
type Prober interface {
	Probe(ctx context.Context) error
}

// WindowCounter is the optional capability behind local-first (async) counting: add deltas to
// window counters and read their totals, for many keys in one round trip. Stores that share
// state between processes (Redis, memory for tests) implement it beside Take.
type WindowCounter interface {
	// AddWindowCounts applies every item's Deltas and fills in its Totals (or Err). It makes
	// one round trip for the whole batch. An error wrapping ErrStoreUnavailable means no
	// item's outcome is known.
	AddWindowCounts(ctx context.Context, batch []WindowCounts) error
}

// Heartbeater is the optional capability behind the fallback's global budget: instances
// of one group announce themselves with a short-lived heartbeat and learn how many are live.
type Heartbeater interface {
	// Heartbeat marks instance live in group for ttl and returns the number of live instances
	// in the group, this one included.
	Heartbeat(ctx context.Context, group, instance string, ttl time.Duration) (live int, err error)
}
