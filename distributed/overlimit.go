package distributed

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/shardmap"
)

// DefaultOverLimitMaxKeys bounds the over-limit cache unless WithMaxKeys says otherwise.
const DefaultOverLimitMaxKeys = 100_000

// OverLimit is a Store decorator that remembers denials: once the wrapped store denies n units
// of a key with a RetryAfter, requests for n or more units of that key under the same rule are
// denied locally, without a store call, until RetryAfter has passed. Allowed requests, peeks
// and refunds always go to the store, so allows are exactly as accurate as the store's, and a
// denial served from the cache is one the store would have given (nothing is admitted
// meanwhile by this key's cached requests; other instances can only consume more).
//
// Reservations (Request.MaxDelay > 0, from Limiter.Wait) and settles (Request.Settle, which
// apply whatever the limit) bypass the cache; a settle that changes the state drops the entry.
// A request with a different Rule than the cached denial (a dynamic limit change) drops the
// entry and goes to the store. A refund drops it too. Memory is bounded by WithMaxKeys.
//
// OverLimit is safe for concurrent use. Serving a cached denial allocates nothing.
type OverLimit struct {
	next    sluice.Store
	clock   sluice.Clock
	denials *shardmap.Map[denial]
}

// denial is a cached store denial.
type denial struct {
	rule      sluice.Rule
	n         int64 // the smallest cost known to be denied
	until     int64 // Unix ns at which the denied request would be allowed
	resetAt   int64 // Unix ns at which the key is back to full
	remaining int64
}

// denialRemaining lets a full shard drop the denial that expires soonest.
func denialRemaining(e denial, now int64) int64 { return e.until - now }

type overLimitConfig struct {
	clock   sluice.Clock
	maxKeys int
}

// NewOverLimit wraps next with an over-limit cache. Its options are WithClock and
// WithMaxKeys. A nil store, another option or an invalid value is an error naming it.
func NewOverLimit(next sluice.Store, opts ...Option) (*OverLimit, error) {
	cfg := overLimitConfig{maxKeys: DefaultOverLimitMaxKeys}
	if err := applyOptions("NewOverLimit", opts, &cfg, func(o Option) func(*overLimitConfig) { return o.overLimit }); err != nil {
		return nil, err
	}
	switch {
	case next == nil:
		return nil, fmt.Errorf("distributed: NewOverLimit: %w", sluice.ErrNoStore)
	case cfg.maxKeys <= 0:
		return nil, fmt.Errorf("distributed: WithMaxKeys: must be positive, got %d", cfg.maxKeys)
	}
	return &OverLimit{next: next, clock: cfg.clock, denials: shardmap.New(cfg.maxKeys, denialRemaining)}, nil
}

// Take implements sluice.Store.
func (o *OverLimit) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	sh := o.denials.Shard(req.Key)
	if decidesNow(&req) {
		t := now(o.clock)
		sh.Lock()
		if e, ok := sh.Get(req.Key); ok {
			switch {
			case e.rule != req.Rule || t >= e.until:
				sh.Delete(req.Key)
			case req.N >= e.n:
				sh.Unlock()
				return sluice.Decision{Limit: req.Rule.Capacity(), Remaining: e.remaining,
					RetryAfter: time.Duration(e.until - t), ResetAfter: time.Duration(max(0, e.resetAt-t))}, nil
			}
		}
		sh.Unlock()
	}
	d, err := o.next.Take(ctx, req)
	if err != nil {
		return d, err
	}
	switch {
	case !d.Allowed && d.RetryAfter > 0 && decidesNow(&req):
		t := now(o.clock)
		sh.Lock()
		putDenial(sh, req.Key, denial{rule: req.Rule, n: req.N, until: t + int64(d.RetryAfter),
			resetAt: t + int64(d.ResetAfter), remaining: d.Remaining}, t)
		sh.Unlock()
	case d.Allowed && req.N != 0:
		sh.Lock()
		sh.Delete(req.Key) // a refund, or an allow of fewer units: the state has changed
		sh.Unlock()
	}
	return d, nil
}

// putDenial caches e under key, keeping the smallest denied cost when one is already cached.
func putDenial(sh *shardmap.Shard[denial], key string, e denial, t int64) {
	if old, ok := sh.Get(key); ok {
		if old.rule == e.rule && old.until > t && old.n < e.n {
			return // a smaller cost is already known to be denied
		}
		sh.Set(key, e)
		return
	}
	if sh.MakeRoom(t) {
		sh.Set(strings.Clone(key), e)
	}
}

// Len reports the number of cached denials, including expired ones not yet replaced.
func (o *OverLimit) Len() int { return o.denials.Len() }

// Flush flushes the wrapped store when it is a sluice.Flusher; the cache itself holds nothing
// pending.
func (o *OverLimit) Flush(ctx context.Context) error { return flushNext(ctx, o.next) }

// Close drops the cached denials and flushes the wrapped store. It does not close it.
func (o *OverLimit) Close() error {
	o.denials.Clear()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return o.Flush(ctx)
}

// decidesNow reports whether req is a take decided now (with or without a criticality
// reserve): the kinds a cached denial answers. A wait may be admitted ahead, a settle
// whatever the key holds, and a peek or a refund consumes nothing.
func decidesNow(req *sluice.Request) bool {
	k := req.Kind()
	return k == sluice.KindTake || k == sluice.KindTakeReserved
}
