// Package adaptive holds an in-flight limit that follows the backend's latency: a gradient
// limiter in the style of Netflix's concurrency-limits Gradient2.
//
// Gradient keeps two exponential averages of the round-trip times it is told about, a short
// one (the latency now) and a long one (the latency the backend has when it is not queueing).
// On every sample it compares them: when the short average rises past Tolerance times the
// long one, the backend is queueing and the limit is cut in proportion (by half at most per
// sample, smoothed); otherwise it grows by a queue allowance, so it keeps probing for room.
// The limit never leaves [Floor, Ceiling]. While fewer than half the limit's slots are in
// use the limit stays where it is: an idle service learns nothing about its backend's room.
//
// Gradient does no timing itself: it is told each round-trip time, so tests pass exact
// durations and nothing sleeps. Local is a per-instance gate around a Gradient that counts
// the requests in flight and measures them on a sluice.Clock. To share the limit across a
// fleet, pass Gradient.Limit as the limit of sluice.Limiter's in-flight calls and tell the
// Gradient each request's round trip (httplimit, grpclimit and sluice proxy do this when given
// a Gradient): every instance then enforces the fleet-wide count against its own estimate.
package adaptive
