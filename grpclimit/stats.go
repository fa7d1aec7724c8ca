package grpclimit

// Stats are an Interceptor's counts since it was built: a snapshot of the counters of
// Sluice's library transports (httplimit.Stats, whose fields say what each counts).
type Stats struct {
	// Allowed and Denied count the calls the limits admitted and refused (a rate limit, or an
	// in-flight limit's slot).
	Allowed, Denied uint64
	// StoreErrors counts the calls the store could not decide, which the failure policy
	// then ran (fail open: FailedOpen) or refused (fail closed: FailedClosed).
	StoreErrors, FailedOpen, FailedClosed uint64
	// Invalid counts defects: a key the store refused (codes.InvalidArgument), a key function
	// that panicked (codes.Internal), a cost function that panicked or returned less than 1
	// (the call cost 1).
	Invalid uint64
}

// Stats returns the interceptor's counts. It is safe for concurrent use.
func (in *Interceptor) Stats() Stats {
	s := in.door.Pipeline.Stats()
	return Stats{Allowed: s.Allowed.Load(), Denied: s.Denied.Load(), StoreErrors: s.StoreErrors.Load(),
		FailedOpen: s.FailedOpen.Load(), FailedClosed: s.FailedClosed.Load(), Invalid: s.BadInput.Load()}
}
