// Package alloc splits a quota bucket's limit among the clients that share it: the max-min
// fair split (water filling) of the limit over the clients' smoothed demands, or a split
// proportional to demand, or a static share per client. It is the allocation core of the
// RLQS quota server (package quota/rlqs) and of `sluice simulate`'s quota mode.
//
// A Bucket tracks, per client, a sliding history of reported usage and the assignments
// handed out with their expiry. ReportPush hands the reporter its new share and pushes every
// other client of this replica whose share moved by more than a deadband its new one, to be
// sent on its stream at once. A share is never handed out before it is free: a client whose
// share shrinks is counted at what it held until its new assignment is delivered
// (Delivered; a client applies an assignment when it receives it), so a newcomer gets what
// is free at once and the rest when the shrinks it needs have been delivered. The shares
// the clients may be spending therefore sum to at most the limit at every instant, in
// whatever order the streams deliver. A client that is gone or idle counts at what it
// holds until that expires (Release frees it at once, for buckets that choose it:
// Settings.ReleaseOnLeave), and Rebalance hands out what expired without a report.
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
