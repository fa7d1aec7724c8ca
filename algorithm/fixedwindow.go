package algorithm

import "github.com/sluicehq/sluice"

// FixedWindow counts units in windows of one period aligned to the Unix epoch. Memory: 16
// bytes. Bound: any span of one period sees at most 2 x Limit (Limit at the end of one window
// and Limit at the start of the next).
//
// A new period takes effect from the next window; a new limit at once, against the units
// already counted in this window.
type FixedWindow struct {
	// End is the end of the current window (Unix ns); Count the units admitted in it.
	End, Count int64
}

// Algorithm returns sluice.AlgorithmFixedWindow.
func (*FixedWindow) Algorithm() sluice.Algorithm { return sluice.AlgorithmFixedWindow }

// Take implements State.
func (s *FixedWindow) Take(now int64, r sluice.Rule, n, maxDelay int64) sluice.Decision {
	p := Compile(r)
	return s.TakeParams(now, &p, n, maxDelay)
}

// TakeParams implements State.
func (s *FixedWindow) TakeParams(now int64, pr *Params, n, _ int64) sluice.Decision {
	if now >= s.End { // a new window; a clock gone backwards stays in the current one
		p := pr.period
		s.End = floorDiv(now, p)*p + p
		s.Count = 0
	}
	limit := pr.Rule.Limit
	d := sluice.Decision{Limit: limit}
	switch {
	case n > limit:
		return never(limit, max(0, limit-s.Count), s.resetAfter(now))
	case n < 0:
		s.Count = max(0, s.Count+n)
		d.Allowed = true
	case s.Count+n <= limit:
		s.Count += n
		d.Allowed = true
	default:
		d.RetryAfter = dur(s.End - now)
	}
	d.Remaining = max(0, limit-s.Count)
	d.ResetAfter = dur(s.resetAfter(now))
	return d
}

func (s *FixedWindow) resetAfter(now int64) int64 {
	if s.Count == 0 {
		return 0
	}
	return s.End - now
}
