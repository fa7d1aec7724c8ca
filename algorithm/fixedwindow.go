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
func (s *FixedWindow) Take(now int64, pr *Params, n, maxDelay int64) sluice.Decision {
	d := decision(s.decide(now, pr, n, maxDelay))
	d.Capacity = pr.Rule.Limit
	return d
}

// Settle implements State: a debt is a count above the limit in the current window, which
// admits nothing more; like every count, it leaves with the window.
func (s *FixedWindow) Settle(now int64, pr *Params, n int64) sluice.Decision {
	return settle(s, now, pr, n)
}

func (s *FixedWindow) charge(_ int64, pr *Params, n int64) {
	s.Count = max(s.Count, min(s.Count+n, pr.Rule.Limit+pr.maxDebt))
}

// decide is Take with the decision in registers, but for Limit. A window cannot schedule:
// maxDelay is ignored.
func (s *FixedWindow) decide(now int64, pr *Params, n, _ int64) (allowed bool, remaining, retryAfter, resetAfter, delay int64) {
	if now >= s.End { // a new window; a clock gone backwards stays in the current one
		p := pr.period
		s.End = WindowIndex(now, p)*p + p
		s.Count = 0
	}
	limit := pr.Rule.Limit
	switch {
	case n > limit:
		return false, max(0, limit-s.Count), -1, s.resetAfter(now), 0
	case n < 0:
		s.Count = max(0, s.Count+n)
		allowed = true
	case s.Count+n <= limit:
		s.Count += n
		allowed = true
	default:
		retryAfter = s.End - now
	}
	return allowed, max(0, limit-s.Count), retryAfter, s.resetAfter(now), 0
}

// Carried is the part of a fixed window's count carried from a window of an earlier period:
// Count units that leave at End, if that comes before the window's own end. A FixedWindow
// never carries (a new period takes effect from its next window); package distributed's Async,
// which counts in the new period's windows at once, carries a key's count over a change of
// period (see TakeCarrying).
type Carried struct {
	Count, End int64
}

// TakeCarrying is Take on a window whose Count includes c.Count carried units: a
// refund takes them back first (c.Count is updated), RetryAfter counts on them leaving at c.End
// when the rest of the window has room, and ResetAfter when they are all the window counts. A
// new window (now at or after End) carries nothing.
func (s *FixedWindow) TakeCarrying(now int64, pr *Params, n int64, c *Carried) sluice.Decision {
	if now >= s.End {
		c.Count = 0
	}
	count := s.Count
	d := s.Take(now, pr, n, 0)
	if n < 0 {
		c.Count = max(0, c.Count+s.Count-count)
	}
	if !d.Allowed && d.RetryAfter != sluice.Never && s.Count-c.Count+n <= d.Capacity && c.End < s.End {
		d.RetryAfter = dur(c.End - now)
	}
	if s.Count != 0 && s.Count == c.Count {
		d.ResetAfter = dur(min(s.End, c.End) - now)
	}
	return d
}

func (s *FixedWindow) resetAfter(now int64) int64 {
	if s.Count == 0 {
		return 0
	}
	return s.End - now
}
