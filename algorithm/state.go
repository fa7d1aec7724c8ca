package algorithm

import (
	"math"
	"math/bits"
	"time"

	"github.com/sluicehq/sluice"
)

// State is one key's state under one algorithm.
type State interface {
	// Take decides on n units at time now (Unix ns) under the rule compiled in p (see Compile),
	// updating the state when the request is admitted or n <= 0. maxDelay (ns) > 0 lets bucket
	// algorithms schedule a future slot. The rule must be valid (sluice.Rule.Validate) and n
	// must be >= -sluice.MaxLimit; a rule different from the last call's is applied from this
	// call on.
	Take(now int64, p *Params, n, maxDelay int64) sluice.Decision
	// Settle applies n units at time now whatever the limit (sluice.Request.Settle): a negative
	// n refunds -n units as Take does, a positive n is charged even past the capacity, so the
	// key goes into debt (at most MaxDebt units) that later requests pay before they
	// are admitted again. The decision is Allowed, with Remaining 0 while the key is in debt,
	// RetryAfter how long until the debt is paid (0 when there is none; what a peek, Take
	// with n = 0, would report) and ResetAfter as Take's. |n| must be at most
	// sluice.MaxLimit; the rule as for Take.
	Settle(now int64, p *Params, n int64) sluice.Decision
	// Algorithm reports which algorithm the state belongs to.
	Algorithm() sluice.Algorithm
}

// New returns the empty (full-capacity) state for the rule's algorithm, or nil for an invalid
// algorithm.
func New(a sluice.Algorithm) State {
	switch a {
	case sluice.AlgorithmFixedWindow:
		return new(FixedWindow)
	case sluice.AlgorithmSlidingLog:
		return new(SlidingLog)
	case sluice.AlgorithmSlidingWindow:
		return new(SlidingWindow)
	case sluice.AlgorithmTokenBucket:
		return new(TokenBucket)
	case sluice.AlgorithmLeakyBucket:
		return new(LeakyBucket)
	case sluice.AlgorithmGCRA:
		return new(GCRA)
	}
	return nil
}

// charger is a State that can charge units past its capacity: charge adds n > 0 units (at
// most Params.capacity + Params.maxDebt) to a state brought up to now by a peek, never
// lowering what the state holds. Each algorithm's charge says what its debt is.
type charger interface {
	State
	charge(now int64, p *Params, n int64)
}

// settle is State.Settle for every algorithm: n is applied first (a refund as Take applies
// it, a charge by the state's charge), then the key is reported as a peek would report it,
// but Allowed: a peek denies while the key is in debt, and its RetryAfter is when the debt is
// paid. The Redis scripts mirror this order (store/redis/lua).
func settle(s charger, now int64, p *Params, n int64) sluice.Decision {
	switch {
	case n < 0:
		s.Take(now, p, max(n, -sluice.MaxLimit), 0)
	case n > 0:
		s.Take(now, p, 0, 0)
		s.charge(now, p, min(n, p.capacity+p.maxDebt))
	}
	d := s.Take(now, p, 0, 0)
	d.Allowed = true
	return d
}

// StateBytes is the most memory one key's state under rule r can hold, in bytes, as documented
// on each state: 16 x Limit for the sliding log (8 per timestamp, up to 2 x Limit of them while
// a settle keeps the key in debt), 8 x (SubWindows+1) + 16 for the sliding window, 16 for the
// others. It leaves out what a store adds per key (docs/ALGORITHMS.md has the measured
// totals). A service that accepts rules from its callers bounds it (see package server).
func StateBytes(r sluice.Rule) int64 {
	switch r.Algorithm {
	case sluice.AlgorithmSlidingLog:
		return 16 * r.Limit
	case sluice.AlgorithmSlidingWindow:
		return 8*(r.Windows()+1) + 16
	}
	return 16
}

// Scale is the number of fixed-point sub-units per unit in bucket levels.
const Scale = 1_000_000_000

// mulDiv returns floor(a*b/c) for a, b >= 0 and c > 0, saturating at math.MaxInt64.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// mulDivCeil returns ceil(a*b/c) for a, b >= 0 and c > 0, saturating at math.MaxInt64.
func mulDivCeil(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

func dur(ns int64) time.Duration { return time.Duration(ns) }

// decision assembles a Decision, but for Limit, from the results of the small states' decide
// methods (retryAfter -1 is sluice.Never; the durations are nanoseconds), which store/memory
// reaches through TakeScalar (see internal/fastpath).
func decision(allowed bool, remaining, retryAfter, resetAfter, delay int64) sluice.Decision {
	return sluice.Decision{Allowed: allowed, Remaining: remaining,
		RetryAfter: dur(retryAfter), ResetAfter: dur(resetAfter), Delay: dur(delay)}
}

// never is the decision for a cost above the rule's capacity: denied, nothing consumed.
func never(capacity, remaining, resetAfter int64) sluice.Decision {
	return sluice.Decision{Capacity: capacity, Remaining: remaining, RetryAfter: sluice.Never, ResetAfter: dur(resetAfter)}
}

// satMul returns a*b for a, b >= 0, saturating at math.MaxInt64.
func satMul(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// satAdd returns a+b for b >= 0, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
