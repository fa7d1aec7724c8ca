package algorithm

import "github.com/sluicehq/sluice"

// level is a bucket level in fixed point (Scale sub-units per unit) that drains at Limit units
// per Period. Token bucket keeps the tokens used, leaky bucket the water held: the same number.
type level struct {
	// Level is the fixed-point level; Last the instant (Unix ns) it was measured at.
	Level, Last int64
}

// drainTo brings the level to now. A clock that went backwards drains nothing and does not
// move Last back, so it never creates capacity. The drained amount is rounded down.
func (b *level) drainTo(now int64, p *Params) {
	if now > b.Last {
		b.drain(now, p)
	}
}

// drain is drainTo for now > b.Last, apart so that drainTo's test inlines: on a coarse clock
// most decisions on a busy key find the clock where the last one left it.
func (b *level) drain(now int64, p *Params) {
	if b.Level > 0 {
		b.Level = max(0, b.Level-p.fill.floor(now-b.Last))
	}
	b.Last = now
}

// timeFor is how long the bucket takes to drain x fixed-point sub-units (rounded up).
func timeFor(x int64, p *Params) int64 {
	if x <= 0 {
		return 0
	}
	return p.drain.ceil(x)
}

// decide applies n units to the bucket. queue selects the leaky bucket's queue discipline
// for waits: a scheduled request starts when the level ahead of it has drained, rather
// than when enough room has drained for it (token bucket).
func (b *level) decide(now int64, p *Params, n, maxDelay int64, queue bool) sluice.Decision {
	d := decision(b.take(now, p, n, maxDelay, queue))
	d.Capacity = p.capacity
	return d
}

// take is decide with the decision in registers, but for Limit.
func (b *level) take(now int64, p *Params, n, maxDelay int64, queue bool) (allowed bool, remaining, retryAfter, resetAfter, delay int64) {
	b.drainTo(now, p)
	capacity, full := p.capacity, p.full
	switch {
	case n > capacity:
		return false, max(0, (full-b.Level)/Scale), -1, timeFor(b.Level, p), 0
	case n < 0:
		b.Level = max(0, b.Level+n*Scale)
		allowed = true
	default:
		over := b.Level + n*Scale - full // > 0: units that do not fit now
		switch {
		case over <= 0 && (maxDelay == 0 || !queue):
			b.Level += n * Scale
			allowed = true
		case maxDelay > 0 && queue && over <= 0 && timeFor(b.Level, p) <= maxDelay:
			delay = timeFor(b.Level, p)
			b.Level += n * Scale
			allowed = true
		case maxDelay > 0 && !queue && timeFor(over, p) <= maxDelay:
			delay = timeFor(over, p)
			b.Level += n * Scale
			allowed = true
		default:
			// Until the same call would succeed: room for n, and for a queue a short enough
			// line ahead.
			wait := timeFor(over, p)
			if maxDelay > 0 {
				if queue {
					wait = max(wait, timeFor(b.Level, p)-maxDelay)
				} else {
					wait -= maxDelay
				}
			}
			retryAfter = max(1, wait)
		}
	}
	return allowed, max(0, (full-b.Level)/Scale), retryAfter, timeFor(b.Level, p), delay
}

// allow is take(now, p, n, 0, queue), for either queue: without a delay to wait, both
// disciplines admit what fits now. It is the memory store's hot path (TakeScalar), spelled
// out without take's waits; TestAllowIsTake holds the two to one result.
func (b *level) allow(now int64, p *Params, n int64) (allowed bool, remaining, retryAfter, resetAfter int64) {
	b.drainTo(now, p)
	lvl, full := b.Level, p.full
	switch {
	case n > p.capacity:
		retryAfter = -1
	case n < 0:
		lvl = max(0, lvl+n*Scale)
		b.Level, allowed = lvl, true
	default:
		if over := lvl + n*Scale - full; over > 0 { // units that do not fit now
			retryAfter = max(1, timeFor(over, p))
		} else {
			lvl += n * Scale
			b.Level, allowed = lvl, true
		}
	}
	return allowed, max(0, (full-lvl)/Scale), retryAfter, timeFor(lvl, p)
}

// charge takes n more units past the capacity: the level rises above full (a token bucket's
// tokens go below zero, a leaky bucket holds more than it can), and the refill pays the debt
// before anything fits again.
func (b *level) charge(_ int64, p *Params, n int64) {
	b.Level = max(b.Level, min(b.Level+n*Scale, p.full+p.maxDebt*Scale))
}

// TokenBucket refills Limit tokens per Period continuously, holding at most Capacity (Burst,
// or Limit). Exact: any span of length t admits at most Capacity + Limit x t/Period (refill is
// counted in billionths of a token, rounded down). Memory: 16 bytes. Waits (Wait)
// borrow tokens ahead: the request starts when the tokens it needs have refilled. A new rule
// applies at once to the tokens used so far.
type TokenBucket struct{ level }

// Algorithm returns sluice.AlgorithmTokenBucket.
func (*TokenBucket) Algorithm() sluice.Algorithm { return sluice.AlgorithmTokenBucket }

// Take implements State.
func (s *TokenBucket) Take(now int64, p *Params, n, maxDelay int64) sluice.Decision {
	return s.decide(now, p, n, maxDelay, false)
}

// Settle implements State: a debt is tokens below zero, which the refill pays.
func (s *TokenBucket) Settle(now int64, p *Params, n int64) sluice.Decision {
	return settle(s, now, p, n)
}

// LeakyBucket holds up to Capacity (Burst, or Limit) units and leaks Limit per Period. As a
// meter (Allow) it admits what fits, exactly like the token bucket. As a queue (Wait) every
// request waits for the units ahead of it to leak out, so admitted requests leave evenly spaced
// at the leak rate and the queue never holds more than Capacity units. Memory: 16 bytes.
type LeakyBucket struct{ level }

// Algorithm returns sluice.AlgorithmLeakyBucket.
func (*LeakyBucket) Algorithm() sluice.Algorithm { return sluice.AlgorithmLeakyBucket }

// Take implements State.
func (s *LeakyBucket) Take(now int64, p *Params, n, maxDelay int64) sluice.Decision {
	return s.decide(now, p, n, maxDelay, true)
}

// Settle implements State: a debt is a level above the capacity, which leaks out first.
func (s *LeakyBucket) Settle(now int64, p *Params, n int64) sluice.Decision {
	return settle(s, now, p, n)
}
