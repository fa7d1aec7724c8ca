// Package redis is Sluice's Redis store: every algorithm as one atomic Lua script, on a single
// Redis, a Sentinel-managed primary or a Redis Cluster, with concurrent decisions coalesced
// into pipelines.
//
// Build a Store on any go-redis v9 UniversalClient with New, or from a URL with NewFromURL:
//
//	redis://[user:password@]host:port[/db]                     a single Redis (rediss:// for TLS)
//	redis-sentinel://[:password@]host:port,host:port/MASTER     a primary found through Sentinels
//	redis-cluster://[user:password@]host:port,host:port        a Redis Cluster (seed nodes)
//
// Query parameters: password (Sentinel: the data nodes' password), sentinel_password, db,
// dial_timeout, pool_size; see NewFromURL.
//
// Each decision runs one EVALSHA of the algorithm's script (EVAL on NOSCRIPT) on one key,
// "<prefix>{<escaped user key>}", so every script works on Cluster and a user key holding '{'
// or '}' cannot choose the slot. The scripts mirror package algorithm
// exactly (the store/storetest suite holds them to it) using integer arithmetic that stays
// exact in Lua's doubles while durations stay below 2^53 ns (104 days); a key whose state goes
// beyond that (a settle's debt of a year) is carried to within a few nanoseconds, the step of
// a double at that size. Every key written has a TTL, at most one second longer than its
// state needs (a state that is back to full is kept one more second, so a clock stepping back
// still sees it): the state records its key's expiry, and while that covers the state the
// script rewrites it with SET KEEPTTL, which costs Redis much less than setting a TTL. Scripts
// take their parameters packed in one argument and answer in one string; the GCRA and fixed
// window scripts make no Lua closure or table (see lua/prelude.lua). `go generate` assembles
// the scripts from lua/*.lua into lua/gen, one file per script the store runs, which the store
// embeds: those files are, byte for byte, what Redis executes.
//
// Throughput: when no other decision of the store is under way and the client honours
// context deadlines (ContextTimeoutEnabled, as NewFromURL sets it), the caller sends its
// script call itself; otherwise concurrent calls are combined into a few pipelines in flight
// at once (WithMaxInFlight), each sent by one of its own callers, the leader, with what has
// queued up meanwhile (WithMaxBatch, WithMaxBatchDelay), while the others wait for their
// answer: no goroutine stands between the callers and the socket. Within a pipeline,
// the decisions of one algorithm (on a Cluster: of one algorithm and one hash slot) go as one
// call of the algorithm's batched script (lua/multi.lua around the algorithm's own body),
// which reads the server clock once and decides key after key, in queue order, exactly as
// one call per decision would; this saves Redis the cost of a script call per decision. The
// sliding log is sent one call per decision, as is any decision alone in its group. A
// batched call that fails fails all its decisions; as with a script call that timed out, the
// decisions before the failure may have committed. Batching needs a *goredis.Client or a
// *goredis.ClusterClient; other clients get one call per decision.
//
// Counters (WithCounters, or counters=true in the URL): the fixed and sliding windows are
// then kept as plain integer counters, one key per window or sub-window, and decided without
// Lua, as envoyproxy/ratelimit decides: INCRBY and PEXPIRE NX (and MGET of the sliding
// window's earlier sub-windows) in one pipeline, package algorithm deciding on the counts
// read, and a DECRBY giving back what a denial did not take. A decision then costs Redis
// about what the peer's INCRBY and EXPIRE cost, at one caller as under load; it may deny
// while a concurrent denial's units are counted (never admit more), and where a rule's period
// changes or the clock goes back it counts in the new (or earlier) window's own counter
// instead of carrying the state over as the scripts do (see plain.go). Every store sharing a
// Redis must make the same choice.
//
// Time: by default the scripts read the Redis server clock (TIME), so clients with skewed
// clocks agree; WithClock passes the client's clock instead. Elapsed time is clamped at zero,
// so a failover to a server whose clock is behind creates no capacity.
//
// Failure: every call is bounded by its context and WithTimeout (default 250ms). Script calls
// are never retried by go-redis (a call that timed out may have committed). Transport errors,
// timeouts and Redis errors (OOM, READONLY, CROSSSLOT, ...) wrap sluice.ErrStoreUnavailable;
// invalid requests wrap ErrInvalidRule, ErrInvalidKey or ErrInvalidN and never reach Redis.
//
// Logging: go-redis writes its own lines (a failed dial, a Sentinel switch) as plain text to
// standard error, through one logger per process. SetLogger routes them through a
// *slog.Logger instead, at most one per interval; the store never installs it by itself, as
// the logger belongs to the program (sluice serve installs it).
//
// A Store is safe for concurrent use.
package redis
