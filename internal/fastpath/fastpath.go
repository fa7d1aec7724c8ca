// Package fastpath types the memory store's scalar path: sluice.Limiter.AllowN reaches the
// memory store, and the store the small algorithm states, through calls that return a
// decision's fields as scalars in registers. A sluice.Decision has too many fields for the
// compiler to keep in registers: returned from a call, it is stored to the stack and copied,
// and the copy stalls on the stores just made, a few ns per call boundary. Measured on
// Limiter.AllowN over the memory store (CPU time per decision, one key): going through
// Store.Take, a Request in and a Decision out, costs 83-113% more than the scalar path.
//
// The calls are exported methods (store/memory's Store.TakeLocal, and the TakeScalar of
// package algorithm's GCRA, TokenBucket, LeakyBucket and FixedWindow) whose first argument is
// a Token: code outside this module cannot import this package, so it cannot build a Token,
// and cannot call them. Inside it, they are ordinary calls: a change of a signature fails to
// compile (Local names the one sluice.Limiter asserts its store on, and store/memory declares
// that its Store implements it).
package fastpath

import "time"

// Token is the first argument of the scalar path's methods. Build it as Token{}; only this
// module can.
type Token struct{ _ struct{} }

// Local is a store that decides plain requests in-process with the decision in registers:
// store/memory's *Store. sluice.Limiter.AllowN asserts its store on it; R is sluice.Rule (this
// package cannot import package sluice, which imports it). TakeLocal is
// Store.Take(ctx, Request{Key: key, Rule: rule, N: n}) with no context, since nothing blocks:
// Limit is rule.Capacity() and Delay is 0.
type Local[R any] interface {
	TakeLocal(_ Token, key string, rule R, n int64) (allowed bool, remaining int64, retryAfter, resetAfter time.Duration, err error)
}

// IsLocal reports whether store is a Local (R is sluice.Rule): it decides in-process.
func IsLocal[R any](store any) bool {
	_, ok := store.(Local[R])
	return ok
}
