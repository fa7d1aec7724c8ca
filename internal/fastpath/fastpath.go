// Package fastpath carries the memory store's decisions in scalars across package boundaries
// without exporting the methods that produce them. A sluice.Decision has too many fields for
// the compiler to keep in registers: returned from a call, it is stored to the stack and
// copied, and the copy stalls on the stores just made, a few ns per call boundary. Measured on
// Limiter.AllowN over the memory store (CPU time per decision, one key): going through
// Store.Take, a Request in and a Decision out, costs 83-113% more than these scalar paths, even
// with the store deciding in scalars inside. So the small algorithm states (package
// algorithm), the memory store (store/memory) and sluice.Limiter hand each other the
// decision's fields instead, through the values held here. Each is set once, at init, by the
// package that implements it and read by the one that calls it; they are typed `any` only
// because this package cannot import the packages that fill it.
package fastpath

// Decide is the signature of a small state's decision in scalars, S being the state type and
// P algorithm.Params: State.Take but for Limit, with retryAfter -1 for sluice.Never and the
// durations in nanoseconds.
type Decide[S, P any] func(s *S, now int64, p *P, n, maxDelay int64) (allowed bool, remaining, retryAfter, resetAfter, delay int64)

// Bucket is Decide for the bucket states, whose one decision takes queue: false for the token
// bucket, true for the leaky bucket's queue discipline (the argument saves a call).
type Bucket[S, P any] func(s *S, now int64, p *P, n, maxDelay int64, queue bool) (allowed bool, remaining, retryAfter, resetAfter, delay int64)

// The Decide of algorithm.GCRA and FixedWindow and the Bucket of algorithm.TokenBucket and
// LeakyBucket, set by package algorithm; store/memory calls them.
var GCRA, TokenBucket, LeakyBucket, FixedWindow any

// Local, set by store/memory, returns for a *memory.Store a view of it with the method
// TakeLocal(key string, rule sluice.Rule, n int64) (allowed bool, remaining int64,
// retryAfter, resetAfter time.Duration, err error), which sluice.Limiter.AllowN calls, and nil
// for any other store. The results are those of Store.Take with Request{Key: key, Rule: rule,
// N: n}: Limit is rule.Capacity() and Delay is 0.
var Local func(store any) any
