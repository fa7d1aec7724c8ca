package algorithm

import "github.com/sluicehq/sluice"

// GCRA is the generic cell rate algorithm (virtual scheduling): one timestamp, the theoretical
// arrival time TAT, which runs ahead of now by the time the units admitted so far take to be
// emitted at one per interval T = Period/Limit. A request of n fits if TAT, moved on by n x T,
// is at most Capacity x T ahead of now. It makes the same decisions as TokenBucket in 8 bytes.
//
// T is rounded up to a whole nanosecond (Rule.Validate keeps it at least a microsecond), so the
// burst is exact and the sustained rate is never above Limit per Period: at most 0.1% below it,
// and exact when Limit divides Period in nanoseconds.
//
// A rule change keeps the consumed time (TAT - now) rather than the consumed units: after a
// change, the key is back to full when it would have been under the old rule.
type GCRA struct {
	// TAT is the theoretical arrival time (Unix ns); at or before now the bucket is full.
	TAT int64
}

// Algorithm returns sluice.AlgorithmGCRA.
func (*GCRA) Algorithm() sluice.Algorithm { return sluice.AlgorithmGCRA }

// Interval returns the rule's emission interval in nanoseconds, rounded up.
func Interval(r sluice.Rule) int64 { return mulDivCeil(1, int64(r.Period), r.Limit) }

// Take implements State.
func (s *GCRA) Take(now int64, r sluice.Rule, n, maxDelay int64) sluice.Decision {
	p := Compile(r)
	return s.TakeParams(now, &p, n, maxDelay)
}

// TakeParams implements State.
func (s *GCRA) TakeParams(now int64, p *Params, n, maxDelay int64) sluice.Decision {
	capacity, t, window := p.capacity, p.interval, p.window
	tat := max(s.TAT, now)
	d := sluice.Decision{Limit: capacity}
	switch {
	case n > capacity:
		return never(capacity, p.perUnit.floor(max(0, window-(tat-now))), tat-now)
	case n < 0:
		s.TAT = max(now, tat+n*t)
		tat = s.TAT
		d.Allowed = true
	default:
		next := tat + n*t
		wait := next - now - window // > 0: how long until n fits
		switch {
		case wait <= 0:
			s.TAT, tat = next, next
			d.Allowed = true
		case maxDelay > 0 && wait <= maxDelay:
			s.TAT, tat = next, next
			d.Allowed = true
			d.Delay = dur(wait)
		default:
			d.RetryAfter = dur(wait - maxDelay)
		}
	}
	d.Remaining = p.perUnit.floor(max(0, window-(tat-now)))
	d.ResetAfter = dur(tat - now)
	return d
}
