// Package algorithm holds the rate-limiting algorithms as pure state machines: each takes the
// current time as a parameter, does no I/O and allocates nothing per decision. Stores keep one
// State per key and decide each request on it with Apply, the one dispatch of a request's kind
// (sluice.Request.Kind), under their own synchronisation (a lock, a CAS loop); the Redis
// store mirrors the same arithmetic and dispatch in Lua and is held to it by the
// store/storetest suite.
// Package distributed's Async decides window rules with FixedWindow and SlidingWindow
// themselves, over its local view of a store's window counters.
//
// Time is Unix nanoseconds (int64). Arithmetic is integer: bucket levels are fixed-point with
// 1e9 sub-units per unit, products go through 128-bit intermediates, and every rounding is
// towards the limit (never creating capacity). See docs/ALGORITHMS.md for each algorithm's
// accuracy bound and memory per key.
//
// A State is not safe for concurrent use; the store serialises access.
package algorithm
