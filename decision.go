package sluice

import "time"

// Never is the RetryAfter of a request that can never be allowed under its rule, because its
// cost exceeds the rule's capacity.
const Never time.Duration = -1

// Decision is the outcome of one rate-limit decision. A denial is a Decision with Allowed
// false, not an error.
//
// The zero Decision denies with no information; stores always fill every field.
type Decision struct {
	// Allowed reports whether the request was admitted (and its cost consumed).
	Allowed bool
	// Capacity is the capacity of the rule: the limit per period for window algorithms, the burst
	// (bucket size) for token bucket, leaky bucket and GCRA.
	Capacity int64
	// Remaining is how many more units could be admitted right now, after this decision.
	Remaining int64
	// RetryAfter is 0 when Allowed. When denied, it is how long until the same request would
	// be allowed if nothing else were admitted meanwhile, or Never (negative) when the cost
	// exceeds the rule's capacity.
	RetryAfter time.Duration
	// ResetAfter is how long until the key's state is back to full capacity (nothing
	// consumed) if nothing else is admitted.
	ResetAfter time.Duration
	// Delay is set only by waits (Request.MaxDelay > 0, used by Limiter.Wait): the
	// admitted request holds a slot that starts Delay from now, and the caller should wait
	// that long before acting. It is 0 for ordinary decisions.
	Delay time.Duration
	// NextAfter, on an allowed take that leaves Remaining 0, is how long until one more unit
	// is free if nothing else is admitted meanwhile: what RetryAfter would say for a take of
	// one unit now. 0 when units remain or the store does not tell (today only the Redis
	// store's fixed and sliding windows do). The over-limit cache (package distributed) holds
	// the key's next requests for that long without asking the store.
	NextAfter time.Duration
}

// ResetIn is the reset a transport reports for d, decided under a rule of period period: RLS's
// duration_until_reset, the RateLimit header's t, X-RateLimit-Reset, Retry-After, gRPC's
// RetryInfo. For an admitted request it is ResetAfter, the time until the state is back to
// full (0 once it is). For a denied one it is always positive, so that a client that waits it
// is not refused at once for being early: RetryAfter, the time until the same request would
// be allowed; for a denial that does not say (RetryAfter 0: a limit only peeked after another
// denied), ResetAfter, the time until the key's state is empty; for a request that can never
// be allowed (RetryAfter Never), that time too but at most period. Either is period when the
// state is empty already; a period <= 0 counts as one second.
func (d Decision) ResetIn(period time.Duration) time.Duration {
	switch {
	case d.Allowed:
		return max(d.ResetAfter, 0)
	case d.RetryAfter > 0:
		return d.RetryAfter
	}
	if period <= 0 {
		period = time.Second
	}
	switch {
	case d.ResetAfter <= 0:
		return period
	case d.RetryAfter < 0:
		return min(d.ResetAfter, period)
	}
	return d.ResetAfter
}
