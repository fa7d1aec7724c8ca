package grpclimit

import "sync/atomic"

// Stats counts an Interceptor's decisions since it was built.
type Stats struct {
	// Allowed and Denied count the calls the limits admitted and refused.
	Allowed, Denied uint64
	// StoreErrors counts the calls the store could not decide, which the failure policy
	// then ran (fail open) or refused (fail closed).
	StoreErrors uint64
	// Invalid counts defects: a key the store refused (codes.InvalidArgument), a key function
	// that panicked (codes.Internal), a cost function that panicked or returned less than 1
	// (the call cost 1).
	Invalid uint64
}

type counters struct {
	allowed, denied, storeErrors, invalid atomic.Uint64
}

// Stats returns the interceptor's counts. It is safe for concurrent use.
func (in *Interceptor) Stats() Stats {
	return Stats{Allowed: in.count.allowed.Load(), Denied: in.count.denied.Load(),
		StoreErrors: in.count.storeErrors.Load(), Invalid: in.count.invalid.Load()}
}
