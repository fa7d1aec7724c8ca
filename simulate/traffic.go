package simulate

import "math/rand/v2"

// rate is an arrival rate in requests per nanosecond, possibly varying with time.
type rate interface {
	// bound is an upper bound of the rate over the run; accept reports whether a candidate
	// arrival at t drawn at rate bound is kept (thinning).
	bound() float64
	accept(rng *rand.Rand, t int64) bool
}

type constant float64

func (c constant) bound() float64              { return float64(c) }
func (constant) accept(*rand.Rand, int64) bool { return true }

// thinned is a time-varying rate at most max, sampled by Lewis-Shedler thinning.
type thinned struct {
	rate func(t int64) float64
	max  float64
}

func (t thinned) bound() float64 { return t.max }
func (t thinned) accept(rng *rand.Rand, at int64) bool {
	return rng.Float64()*t.max < t.rate(at)
}

// poisson appends Poisson arrivals of cost 1 for client over [from, to) at rate r.
func poisson(rng *rand.Rand, events []Event, client int32, from, to int64, r rate) []Event {
	b := r.bound()
	if b <= 0 {
		return events
	}
	for t := float64(from); ; {
		t += rng.ExpFloat64() / b
		at := int64(t)
		if at >= to {
			return events
		}
		if r.accept(rng, at) {
			events = append(events, Event{At: at, Client: client, N: 1})
		}
	}
}
