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
// Clients may carry a criticality class (ReportClass; sluice.Criticality). When the demands
// of clients of several classes exceed the limit, the classes are served most important
// first: each gets its whole demand while the limit lasts (split among its clients by the
// Fairness), the first class that does not fit shares what is left, and the classes after it
// get nothing. When the demands fit, or every client is of one class, the split is the
// Fairness's over every client, as without classes.
//
// Everything here is pure: time is passed in (Unix nanoseconds), there is no I/O, and a
// Bucket is not safe for concurrent use (the caller holds a lock, or a Redis transaction).
package alloc
