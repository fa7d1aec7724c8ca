package algorithm

import "github.com/sluicehq/sluice/internal/fastpath"

// The small states' decisions with the results in registers, for the memory store's scalar
// path (package internal/fastpath), which calls them directly: each is Take(now, p, n, 0) but
// for Limit (p.Rule.Capacity()) and Delay (0), with retryAfter -1 for sluice.Never and the
// durations in nanoseconds. Code outside this module cannot call them.

// TakeScalar is Take in registers, for store/memory (see above).
func (s *GCRA) TakeScalar(_ fastpath.Token, now int64, p *Params, n int64) (allowed bool, remaining, retryAfter, resetAfter int64) {
	return s.allow(now, p, n)
}

// TakeScalar is Take in registers, for store/memory (see above).
func (s *TokenBucket) TakeScalar(_ fastpath.Token, now int64, p *Params, n int64) (allowed bool, remaining, retryAfter, resetAfter int64) {
	return s.allow(now, p, n)
}

// TakeScalar is Take in registers, for store/memory (see above).
func (s *LeakyBucket) TakeScalar(_ fastpath.Token, now int64, p *Params, n int64) (allowed bool, remaining, retryAfter, resetAfter int64) {
	return s.allow(now, p, n)
}

// TakeScalar is Take in registers, for store/memory (see above).
func (s *FixedWindow) TakeScalar(_ fastpath.Token, now int64, p *Params, n int64) (allowed bool, remaining, retryAfter, resetAfter int64) {
	allowed, remaining, retryAfter, resetAfter, _ = s.decide(now, p, n, 0)
	return allowed, remaining, retryAfter, resetAfter
}
