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
	// Limit is the capacity of the rule: the limit per period for window algorithms, the burst
	// (bucket size) for token bucket, leaky bucket and GCRA.
	Limit int64
	// Remaining is how many more units could be admitted right now, after this decision.
	Remaining int64
	// RetryAfter is 0 when Allowed. When denied, it is how long until the same request would
	// be allowed if nothing else were admitted meanwhile, or Never (negative) when the cost
	// exceeds the rule's capacity.
	RetryAfter time.Duration
	// ResetAfter is how long until the key's state is back to full capacity (nothing
	// consumed) if nothing else is admitted.
	ResetAfter time.Duration
	// Delay is set only by reservations (Request.MaxDelay > 0, used by Limiter.Wait): the
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
