package algorithm

import "github.com/sluicehq/sluice/internal/fastpath"

// The small states' decisions in scalars, for store/memory (see package internal/fastpath).
func init() {
	fastpath.GCRA = fastpath.Decide[GCRA, Params]((*GCRA).decide)
	fastpath.TokenBucket = fastpath.Bucket[TokenBucket, Params]((*TokenBucket).take)
	fastpath.LeakyBucket = fastpath.Bucket[LeakyBucket, Params]((*LeakyBucket).take)
	fastpath.FixedWindow = fastpath.Decide[FixedWindow, Params]((*FixedWindow).decide)
}
