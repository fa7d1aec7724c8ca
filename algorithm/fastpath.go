package algorithm

import "github.com/sluicehq/sluice/internal/fastpath"

// The small states' decisions in scalars, for store/memory (see package internal/fastpath).
func init() {
	fastpath.GCRA = fastpath.Decide[GCRA, Params]((*GCRA).decide)
	fastpath.TokenBucket = fastpath.Decide[TokenBucket, Params](func(s *TokenBucket, now int64, p *Params, n, maxDelay int64) (bool, int64, int64, int64, int64) {
		return s.take(now, p, n, maxDelay, false)
	})
	fastpath.LeakyBucket = fastpath.Decide[LeakyBucket, Params](func(s *LeakyBucket, now int64, p *Params, n, maxDelay int64) (bool, int64, int64, int64, int64) {
		return s.take(now, p, n, maxDelay, true)
	})
	fastpath.FixedWindow = fastpath.Decide[FixedWindow, Params]((*FixedWindow).decide)
}
