// Package memcached is Sluice's memcached store, on github.com/bradfitz/gomemcache: the window
// algorithms on memcached's atomic counters, the others as an optimistic gets/cas loop around
// package algorithm's state machines, with the concurrent decisions of a process on one key
// coalesced into one round.
//
// Build a Store on your own *memcache.Client with New, or on a server list with
// NewFromServers or NewFromURL ("memcached://host:port,host:port"), whose client keeps every
// item of one user key on one server, so a server that fails fails only its keys.
//
// Fixed window and sliding window (two windows, or N sub-windows) count in one item per
// window, "<prefix><key>|w<length ms>:<index>", created by add with an expiration covering the
// window's life and incremented by incr: no read-modify-write race. A request that takes
// units increments the current window first and is decided by package algorithm on a view
// of the counters (FixedWindow or SlidingWindow) holding the current count as it was before
// its own units; if it is denied, its units are taken back with decr, so a denied request
// consumes nothing. A sliding window's older sub-windows are read with one get_multi once per
// key and sub-window and remembered (they change little once past; see counters.go), and a
// window the store has not counted in yet is created with add first, so a take is one round
// trip. Between the incr and the decr, other deciders see the denied units counted (the
// transient over-count): it can deny them, never admit more than the limit, and lasts one
// round trip; it is at most one round's units per process (WithMaxBatch requests), and
// Stats.Overshoots counts it (TestTransientOverCount measures it).
// Refunds decrement the windows package algorithm takes them from; peeks and costs above the
// limit only read. A settle (sluice.Request.Settle) reads the counters, applies the
// algorithm's Settle to the view and increments what it charged (decrements what it refunded):
// a take under way meanwhile may not see the debt yet, and settles made at the same instant
// may together charge past the debt bound (algorithm.Params.MaxDebt) by what they charge. A
// change of period or sub-window length starts counting in windows of the new length (the
// memory store carries an estimate over instead); a change of limit applies at once to the
// counts.
//
// Token bucket, leaky bucket, GCRA and the sliding log keep one item, "<prefix><key>|s",
// holding the state in algorithm.AppendState's compact encoding (2 to 20 bytes, a sliding log
// 1 to 3 bytes per unit held, so memcached's item size, 1 MB by default, bounds its limit). A
// decision reads it with gets, decides with the algorithm exactly as the memory store does
// (State.Take, or State.Settle for a settle), and writes it back with cas (add when absent) if
// it changed; a write that lost to another process is retried from a fresh read after a
// jittered pause, at most WithMaxAttempts times, and then fails with a *ContentionError
// wrapping sluice.ErrStoreUnavailable (never a silent allow). Stats.CASConflicts counts the
// lost writes.
//
// Coalescing: concurrent decisions of one Store on one key queue behind the one under way;
// when it is done, the queue (up to WithMaxBatch decisions) is decided in one round, in queue
// order, exactly as one decision after another at that instant would be: one gets/cas for the
// CAS algorithms, one incr of their summed cost (and one decr of what was denied) for
// counters. A hot key costs one round per batch, and only other processes can conflict.
//
// Keys: a user key that is a legal memcached key (no byte <= ' ' or 0x7f) and fits with the
// prefix and suffix in 250 bytes is used as it is; any other ('#'-led ones too) is replaced by
// '#' and the base64url SHA-256 of the key, so nothing unsafe is ever sent and keys never
// collide. Every item has an expiration: the time its window or state still matters, rounded
// up to a whole second, plus one (a minute at least with WithClock; beyond 30 days an
// absolute time).
//
// Time is the client's clock (memcached has none to offer). Window counters are named by the
// latest instant the store has read, so a clock stepping back never reopens an earlier window;
// the algorithms' states clamp a backward step themselves (no refill, no capacity created).
// Between processes, clocks skewed by up to e shift window edges and refills by up to e: a
// process ahead may see a bucket refilled e early, so a key may admit up to Limit x e / Period
// more than its rule in any span (a fixed window's edges, and a sliding window's weights,
// move by e likewise). Keep clocks synchronised (NTP keeps e in milliseconds).
//
// Failure: every round trip is bounded by the client's timeout (WithTimeout for the clients
// NewFromServers builds) and a decision by WithTimeout and its context. Transport errors,
// timeouts and memcached errors wrap sluice.ErrStoreUnavailable; invalid requests wrap
// ErrInvalidRule, ErrInvalidKey or ErrInvalidN and never reach memcached. A round that failed
// may have committed part of its writes (as a Redis call that timed out).
//
// A Store is safe for concurrent use.
package memcached
