// Package rlqs is the Envoy Rate Limit Quota Service (RLQS) of `sluice serve`:
// envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas, handing
// each client (an Envoy, or the Go client of package quota) its share of each bucket's
// limit, split by max-min fairness (package quota/alloc) among the clients that report
// demand for the bucket.
//
// Per stream: the first report names the domain; each BucketQuotaUsage subscribes the
// stream to its bucket and reports the requests allowed and denied since the last report;
// every report message is answered with a BucketAction per bucket it names: a
// QuotaAssignmentAction (the bucket rule's strategy carrying the client's share, with the
// rule's assignment TTL; the same strategy resent extends it) or, for a bucket idle past
// its rule's abandon_after or no longer covered by a rule, an AbandonAction. Drain, called
// before a planned stop, expires every assignment (TTL 0) so clients fall back cleanly.
//
// Bad input ends only the stream that sent it, with InvalidArgument or ResourceExhausted
// naming the problem: a first report without a domain, a domain changed mid-stream, a
// bucket named twice in one report, bucket ids that are empty or too large, negative or
// absurd elapsed times and counts, more buckets than MaxBuckets on one stream.
//
// The allocation state lives in a Ledger: in memory for one replica (the default), or in
// Redis (NewRedisLedger) so that several replicas split one budget.
package rlqs
