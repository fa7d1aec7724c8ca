package adaptive

import (
	"math"
	"sync"
	"time"
)

// Gradient is an in-flight limit that follows the backend's latency (see the package
// documentation). Its methods are safe for concurrent use; the zero value is not usable: make
// one with NewGradient.
type Gradient struct {
	mu    sync.Mutex
	s     Settings
	limit float64
	short average
	long  average
}

// NewGradient returns a Gradient at s.Initial, or an error naming each field of s that cannot
// be used (a *SettingsError).
func NewGradient(s Settings) (*Gradient, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Gradient{s: s, limit: float64(s.Initial),
		short: average{window: s.ShortWindow}, long: average{window: s.LongWindow}}, nil
}

// Settings returns the settings the Gradient runs with, defaults filled in.
func (g *Gradient) Settings() Settings { return g.s }

// Limit returns the current limit, within [Floor, Ceiling].
func (g *Gradient) Limit() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return int(g.limit)
}

// Observe records one request's round-trip time rtt, taken while inFlight requests (this one
// included) were in flight, and returns the new limit. A non-positive rtt is ignored (a clock
// that went backwards says nothing about the backend).
func (g *Gradient) Observe(rtt time.Duration, inFlight int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rtt <= 0 {
		return int(g.limit)
	}
	x := float64(rtt)
	short := g.short.add(x)
	long := g.long.add(x)
	// After a long spike the long average is left far above the backend's latency; pull it
	// down faster than its window would, so the limit grows back to the steady state.
	if long > 2*short {
		g.long.value *= 0.95
		long = g.long.value
	}
	// An instance using under half its limit learns nothing about the backend's room.
	if float64(inFlight) < g.limit/2 {
		return int(g.limit)
	}
	// The gradient is 1 while the short average is within Tolerance of the long one, and
	// falls with the queueing delay, to a half at most per sample so an outlier cannot
	// collapse the limit.
	gradient := math.Max(0.5, math.Min(1, g.s.Tolerance*long/short))
	estimate := g.limit*gradient + float64(g.s.Queue)
	next := g.limit*(1-g.s.Smoothing) + estimate*g.s.Smoothing
	g.limit = math.Max(float64(g.s.Floor), math.Min(float64(g.s.Ceiling), next))
	return int(g.limit)
}
