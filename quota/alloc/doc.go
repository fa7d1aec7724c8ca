// Package alloc splits a quota bucket's limit among the clients that share it: the max-min
// fair split (water filling) of the limit over the clients' smoothed demands, or a split
// proportional to demand, or a static share per client. It is the allocation core of the
// RLQS quota server (package quota/rlqs) and of `sluice simulate`'s quota mode.
//
// A Bucket tracks, per client, a sliding history of reported usage and the assignments
// handed out with their expiry. Report hands a client its new share, never more than the
// part of the limit that is free at that instant: the sum of the shares of every unexpired
// assignment (the largest one per client) never exceeds the limit. A share that shrinks
// takes effect for the others only once the larger assignment has expired, so the fleet
// never holds more than the limit, whichever assignments its clients have received.
//
// Everything here is pure: time is passed in (Unix nanoseconds), there is no I/O, and a
// Bucket is not safe for concurrent use (the caller holds a lock, or a Redis transaction).
package alloc
