// Package alloc splits a quota bucket's limit among the clients that share it: the max-min
// fair split (water filling) of the limit over the clients' smoothed demands, or a split
// proportional to demand, or a static share per client. It is the allocation core of the
// RLQS quota server (package quota/rlqs) and of `sluice simulate`'s quota mode.
//
// A Bucket tracks, per client, a sliding history of reported usage and the latest assignment
// handed out with its expiry. ReportPush hands the reporter its new share and pushes every
// other client of this replica whose share moved by more than a deadband its new one, to be
// sent on its stream at once: a newcomer gets its fair share at its first report, and a
// shrunk share takes effect as soon as it is delivered (a client applies an assignment when
// it receives it). Once the pushes are delivered, the shares the clients hold sum to at most
// the limit; while they are in flight the overcommit is at most the shrinkage they carry.
// A client that is gone or idle counts at what it holds until that expires.
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
