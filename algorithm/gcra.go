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
func (s *GCRA) Take(now int64, p *Params, n, maxDelay int64) sluice.Decision {
	d := decision(s.decide(now, p, n, maxDelay))
	d.Capacity = p.capacity
	return d
}

// Settle implements State: a debt pushes TAT further ahead, past the burst window, and the key
// admits nothing until now catches up with it.
func (s *GCRA) Settle(now int64, p *Params, n int64) sluice.Decision { return settle(s, now, p, n) }

// charge moves TAT, at or after now, on by n x T.
func (s *GCRA) charge(now int64, p *Params, n int64) {
	limit := satAdd(now+p.window, satMul(p.maxDebt, p.interval))
	s.TAT = max(s.TAT, min(satAdd(s.TAT, satMul(n, p.interval)), limit))
}

// decide is Take with the decision in registers, but for Limit.
func (s *GCRA) decide(now int64, p *Params, n, maxDelay int64) (allowed bool, remaining, retryAfter, resetAfter, delay int64) {
	capacity, t, window := p.capacity, p.interval, p.window
	tat := max(s.TAT, now)
	switch {
	case n > capacity:
		return false, p.perUnit.floor(max(0, window-(tat-now))), -1, tat - now, 0
	case n < 0:
		tat, allowed = s.refund(now, tat, t, n), true
	default:
		next := tat + n*t
		wait := next - now - window // > 0: how long until n fits
		switch {
		case wait <= 0:
			s.TAT, tat = next, next
			allowed = true
		case maxDelay > 0 && wait <= maxDelay:
			s.TAT, tat = next, next
			allowed = true
			delay = wait
		default:
			retryAfter = wait - maxDelay
		}
	}
	return allowed, p.perUnit.floor(max(0, window-(tat-now))), retryAfter, tat - now, delay
}

// refund gives back -n units (n < 0) of a TAT at tat >= now and returns the new TAT: at most
// the time consumed (tat - now), past which the key is full. -n x T can overflow int64 (a
// year's period, a refund of 10,000), so it is compared in units first rather than
// multiplied.
func (s *GCRA) refund(now, tat, t, n int64) int64 {
	if -n > (tat-now)/t {
		s.TAT = now
	} else {
		s.TAT = tat + n*t
	}
	return s.TAT
}

// allow is decide(now, p, n, 0) but for the delay (0): the memory store's hot path
// (TakeScalar), spelled out without decide's waits; TestAllowIsTake holds the two to
// one result.
func (s *GCRA) allow(now int64, p *Params, n int64) (allowed bool, remaining, retryAfter, resetAfter int64) {
	t, window := p.interval, p.window
	tat := max(s.TAT, now)
	switch {
	case n > p.capacity:
		retryAfter = -1
	case n < 0:
		tat, allowed = s.refund(now, tat, t, n), true
	default:
		next := tat + n*t
		if wait := next - now - window; wait > 0 { // how long until n fits
			retryAfter = wait
		} else {
			s.TAT, tat = next, next
			allowed = true
		}
	}
	return allowed, p.perUnit.floor(max(0, window-(tat-now))), retryAfter, tat - now
}
