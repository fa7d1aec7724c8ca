// Package sluice is a distributed rate limiter: "client X may make N calls per period", held
// across a whole fleet.
//
// A Limiter makes decisions against a Store, which holds per-key state under one of six
// algorithms (fixed window, sliding log, sliding window, token bucket, leaky bucket, GCRA; see
// Rule). The store may be in-process (store/memory) or shared (store/redis), and may be wrapped
// by decorators that trade accuracy for latency or keep a budget when the shared store fails.
//
//	store, _ := memory.New()
//	lim := sluice.New(store)
//	d, err := lim.Allow(ctx, "client:42", sluice.PerMinute(100))
//	if err == nil && !d.Allowed {
//		// 429, Retry-After: d.RetryAfter
//	}
//
// Rates bound how often; a concurrency limit bounds how much is in progress at once, fleet-wide:
// a Leases, beside the Limiter, holds one of at most InFlight.Limit slots of a key as a lease
// it renews, so a holder that dies frees its slot within the lease.
//
//	leases := sluice.NewLeases(store)
//	defer leases.Close()
//	slot, err := leases.Acquire(ctx, "reports:tenant-7", sluice.InFlight{Limit: 4})
//	if err == nil && slot.Admitted {
//		defer slot.Release()
//		// ... the slow work
//	}
//
// A denial is a Decision with Allowed false; errors mean bad input (ErrInvalidRule,
// ErrInvalidKey, ErrInvalidN) or an unavailable store (ErrStoreUnavailable).
//
// Importing sluice pulls in no Redis, gRPC or Prometheus code.
package sluice
