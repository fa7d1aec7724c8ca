// Package quota is the Go client of Sluice's quota server (RLQS, package quota/rlqs): a
// sluice.Store decorator that holds a share of each bucket's fleet-wide limit and spends it
// locally, so Go services and Envoys share one budget on the same server without a round
// trip per decision.
//
// A Client maps each request's key to a bucket id (by default {"name": key}), subscribes to
// it on one RateLimitQuotaService stream, reports the requests allowed and denied every
// interval, and decides every request on the inner store (typically a memory store) under
// the rule its current assignment describes: a token bucket or requests per time unit at the
// client's share, or a blanket allow or deny. Without an assignment yet (NoAssignment), or
// once it has expired because the server stopped answering or expired it (Expired), it
// follows the configured behaviour: the request's own rule (OwnRule: typically the limit
// divided by the number of instances), the last assignment for a bounded time (ReuseLast),
// Deny or Allow.
//
// With WithCriticalityKey, a request's criticality class (sluice.Request.Criticality, set
// by Limiter.AllowClass) is an entry of its bucket id, so each class of a key holds its own
// share, and a server rule with the same criticality_key serves the most important classes
// first when the fleet's demand exceeds the limit.
//
// Deciding costs one inner-store decision plus two atomic loads and an atomic add: no
// allocation once a key's bucket exists (BENCHMARKS.md).
package quota
