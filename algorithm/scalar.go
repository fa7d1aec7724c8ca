package algorithm

import "github.com/sluicehq/sluice/internal/fastpath"

// TakeScalar is st.Take(now, p, n, 0) with the decision in registers, but for Limit (which is
// p.Rule.Capacity()) and Delay (0): retryAfter -1 is sluice.Never and the durations are
// nanoseconds. The small states (GCRA, token and leaky bucket, fixed window) decide in
// scalars; the others through Take. It is the memory store's scalar path (package
// internal/fastpath): code outside this module cannot call it.
func TakeScalar(_ fastpath.Token, st State, now int64, p *Params, n int64) (allowed bool, remaining, retryAfter, resetAfter int64) {
	switch s := st.(type) {
	case *GCRA:
		allowed, remaining, retryAfter, resetAfter, _ = s.decide(now, p, n, 0)
	case *TokenBucket:
		allowed, remaining, retryAfter, resetAfter, _ = s.take(now, p, n, 0, false)
	case *LeakyBucket:
		allowed, remaining, retryAfter, resetAfter, _ = s.take(now, p, n, 0, true)
	case *FixedWindow:
		allowed, remaining, retryAfter, resetAfter, _ = s.decide(now, p, n, 0)
	default:
		d := st.Take(now, p, n, 0)
		allowed, remaining, retryAfter, resetAfter = d.Allowed, d.Remaining, int64(d.RetryAfter), int64(d.ResetAfter)
	}
	return allowed, remaining, retryAfter, resetAfter
}
