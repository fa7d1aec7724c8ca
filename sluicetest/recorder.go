package sluicetest

import (
	"context"
	"sync"

	"github.com/sluicehq/sluice"
)

// Recorder is a sluice.Store that admits every request and records it, for tests of what a
// layer passes to its store (keys, costs, criticality class). Its Decisions have Limit and
// Remaining set to the request's rule capacity. The zero value is ready; it is safe for
// concurrent use.
type Recorder struct {
	mu       sync.Mutex
	requests []sluice.Request
}

// Take records req and admits it.
func (r *Recorder) Take(_ context.Context, req sluice.Request) (sluice.Decision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, req)
	c := req.Rule.Capacity()
	return sluice.Decision{Allowed: true, Capacity: c, Remaining: c}, nil
}

// Requests returns a copy of the requests recorded so far, in order.
func (r *Recorder) Requests() []sluice.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sluice.Request(nil), r.requests...)
}

// Classes returns the criticality class of each request recorded so far, in order.
func (r *Recorder) Classes() []sluice.Criticality {
	reqs := r.Requests()
	out := make([]sluice.Criticality, len(reqs))
	for i, req := range reqs {
		out[i] = req.Criticality
	}
	return out
}
