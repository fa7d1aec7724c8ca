package distributed

import (
	"context"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultMaxEntries bounds the over-limit cache unless WithMaxEntries says otherwise.
const DefaultMaxEntries = 100_000

const overLimitShards = 32

// OverLimit is a Store decorator that remembers denials: once the wrapped store denies n units
// of a key with a RetryAfter, requests for n or more units of that key under the same rule are
// denied locally, without a store call, until RetryAfter has passed. Allowed requests, peeks
// and refunds always go to the store, so allows are exactly as accurate as the store's, and a
// denial served from the cache is one the store would have given (nothing is admitted
// meanwhile by this key's cached requests; other instances can only consume more).
//
// Reservations (Request.MaxDelay > 0, from Limiter.Wait) bypass the cache.
// A request with a different Rule than the cached denial (a dynamic limit change) drops the
// entry and goes to the store. A refund drops it too. Memory is bounded by WithMaxEntries.
//
// OverLimit is safe for concurrent use. Serving a cached denial allocates nothing.
type OverLimit struct {
	next   sluice.Store
	clock  sluice.Clock
	seed   maphash.Seed
	max    int // per shard
	shards [overLimitShards]overLimitShard
}

type overLimitShard struct {
	mu sync.Mutex
	m  map[string]denial
	_  [40]byte
}

// denial is a cached store denial.
type denial struct {
	rule      sluice.Rule
	n         int64 // the smallest cost known to be denied
	until     int64 // Unix ns at which the denied request would be allowed
	resetAt   int64 // Unix ns at which the key is back to full
	remaining int64
}

// OverLimitOption configures an OverLimit.
type OverLimitOption interface{ applyOverLimit(*overLimitConfig) }

type overLimitConfig struct {
	clock      sluice.Clock
	maxEntries int
}

type overLimitOptionFunc func(*overLimitConfig)

func (f overLimitOptionFunc) applyOverLimit(c *overLimitConfig) { f(c) }

// WithOverLimitClock sets the clock that turns the store's RetryAfter into an instant (default
// the system clock). It should tell the same time as the wrapped store's clock.
func WithOverLimitClock(c sluice.Clock) OverLimitOption {
	return overLimitOptionFunc(func(cfg *overLimitConfig) { cfg.clock = c })
}

// WithMaxEntries bounds the number of cached denials (default DefaultMaxEntries). When full, a
// new denial replaces an expired entry or the one that expires soonest among a few sampled.
func WithMaxEntries(n int) OverLimitOption {
	return overLimitOptionFunc(func(cfg *overLimitConfig) { cfg.maxEntries = n })
}

// NewOverLimit wraps next with an over-limit cache. A nil store or an invalid option is an
// error naming it.
func NewOverLimit(next sluice.Store, opts ...OverLimitOption) (*OverLimit, error) {
	cfg := overLimitConfig{maxEntries: DefaultMaxEntries}
	for _, o := range opts {
		o.applyOverLimit(&cfg)
	}
	switch {
	case next == nil:
		return nil, fmt.Errorf("distributed: NewOverLimit: %w", sluice.ErrNoStore)
	case cfg.maxEntries <= 0:
		return nil, fmt.Errorf("distributed: WithMaxEntries: must be positive, got %d", cfg.maxEntries)
	}
	o := &OverLimit{next: next, clock: cfg.clock, seed: maphash.MakeSeed(),
		max: max(1, cfg.maxEntries/overLimitShards)}
	for i := range o.shards {
		o.shards[i].m = make(map[string]denial)
	}
	return o, nil
}

// Take implements sluice.Store.
func (o *OverLimit) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	sh := &o.shards[maphash.String(o.seed, req.Key)%overLimitShards]
	if req.N > 0 && req.MaxDelay == 0 {
		t := now(o.clock)
		sh.mu.Lock()
		if e, ok := sh.m[req.Key]; ok {
			switch {
			case e.rule != req.Rule || t >= e.until:
				delete(sh.m, req.Key)
			case req.N >= e.n:
				sh.mu.Unlock()
				return sluice.Decision{Limit: req.Rule.Capacity(), Remaining: e.remaining,
					RetryAfter: time.Duration(e.until - t), ResetAfter: time.Duration(max(0, e.resetAt-t))}, nil
			}
		}
		sh.mu.Unlock()
	}
	d, err := o.next.Take(ctx, req)
	if err != nil {
		return d, err
	}
	switch {
	case !d.Allowed && d.RetryAfter > 0 && req.N > 0 && req.MaxDelay == 0:
		t := now(o.clock)
		sh.mu.Lock()
		sh.put(req.Key, denial{rule: req.Rule, n: req.N, until: t + int64(d.RetryAfter),
			resetAt: t + int64(d.ResetAfter), remaining: d.Remaining}, t, o.max)
		sh.mu.Unlock()
	case d.Allowed && req.N != 0:
		sh.mu.Lock()
		delete(sh.m, req.Key) // a refund, or an allow of fewer units: the state has changed
		sh.mu.Unlock()
	}
	return d, nil
}

// put caches e under key, keeping the smallest denied cost when one is already cached.
func (sh *overLimitShard) put(key string, e denial, t int64, limit int) {
	if old, ok := sh.m[key]; ok {
		if old.rule == e.rule && old.until > t && old.n < e.n {
			return // a smaller cost is already known to be denied
		}
		sh.m[key] = e
		return
	}
	if len(sh.m) >= limit {
		var victim string
		soonest := int64(1<<63 - 1)
		i := 0
		for k, v := range sh.m { // map iteration starts at a random place: a random sample
			if v.until <= t {
				victim = k
				break
			}
			if v.until < soonest {
				victim, soonest = k, v.until
			}
			if i++; i == 8 {
				break
			}
		}
		delete(sh.m, victim)
	}
	sh.m[strings.Clone(key)] = e
}

// Len reports the number of cached denials, including expired ones not yet replaced.
func (o *OverLimit) Len() int {
	n := 0
	for i := range o.shards {
		sh := &o.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Flush flushes the wrapped store when it is a Flusher; the cache itself holds nothing
// pending.
func (o *OverLimit) Flush(ctx context.Context) error { return flushNext(ctx, o.next) }

// Close drops the cached denials and flushes the wrapped store. It does not close it.
func (o *OverLimit) Close() error {
	for i := range o.shards {
		sh := &o.shards[i]
		sh.mu.Lock()
		clear(sh.m)
		sh.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return o.Flush(ctx)
}
