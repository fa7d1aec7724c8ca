// Package distributed holds Sluice's distribution modes as Store decorators. Each wraps a
// sluice.Store and is a sluice.Store, so they compose (for example
// NewFallback(NewOverLimit(redisStore))), and each documents its accuracy bound
// (docs/MODES.md has the measured figures):
//
//   - OverLimit caches denials: a key denied until T is denied locally until T, with no store
//     call. Allowed requests still go to the store, so allows stay exact.
//   - Async decides fixed- and sliding-window rules on a local view (last synced global count
//     plus local unsynced delta) and syncs every dirty key in one round trip per interval.
//     Over-admission is bounded by about rate x interval x (nodes - 1).
//   - Fallback decides locally when the store fails or is slow, keeping the global budget
//     (limit / live instances) behind a circuit breaker, or fails open or closed.
//
// Every decorator has Flush(ctx), which pushes its pending state into the wrapped store and
// then flushes the wrapped store if it is a sluice.Flusher, and Close, which flushes and stops the
// decorator's goroutines. Close does not close the wrapped store: the caller owns it, so close
// from the outside in, then close the store.
package distributed
