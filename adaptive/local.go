package adaptive

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Local is a per-instance in-flight gate whose limit is a Gradient: it admits a request while
// fewer than the Gradient's limit are in flight here, and tells the Gradient each request's
// round trip, measured on its clock, when the request is released. Its methods are safe for
// concurrent use and allocate nothing. For a fleet-wide count, use sluice.Limiter's in-flight
// calls with Gradient.Limit as the limit instead.
type Local struct {
	g        *Gradient
	clock    sluice.Clock
	mu       sync.Mutex
	inFlight int
}

// NewLocal returns a gate over g, timing requests on clock (nil: sluice.SystemClock).
func NewLocal(g *Gradient, clock sluice.Clock) *Local {
	if clock == nil {
		clock = sluice.SystemClock{}
	}
	return &Local{g: g, clock: clock}
}

// Acquire admits one request if fewer than the limit are in flight, returning its start time
// (pass it to Release) and true; otherwise it returns false and nothing is held.
func (l *Local) Acquire() (start time.Time, ok bool) {
	limit := l.g.Limit()
	l.mu.Lock()
	if l.inFlight >= limit {
		l.mu.Unlock()
		return time.Time{}, false
	}
	l.inFlight++
	l.mu.Unlock()
	return l.clock.Now(), true
}

// Release ends a request Acquire admitted at start: it frees the slot and tells the Gradient
// the round trip. Call it exactly once per admitted request.
func (l *Local) Release(start time.Time) {
	l.mu.Lock()
	n := l.inFlight
	if n > 0 {
		l.inFlight--
	}
	l.mu.Unlock()
	l.g.Observe(l.clock.Now().Sub(start), n)
}

// InFlight returns the number of requests admitted and not yet released.
func (l *Local) InFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}

// Limit returns the Gradient's current limit.
func (l *Local) Limit() int { return l.g.Limit() }
