package distributed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/shardmap"
)

// DefaultOverLimitMaxKeys bounds the over-limit cache unless WithMaxKeys says otherwise.
const DefaultOverLimitMaxKeys = 100_000

// OverLimit is a Store decorator that remembers denials: once the wrapped store denies n units
// of a key with a RetryAfter, requests for n or more units of that key under the same rule are
// denied locally, without a store call, until RetryAfter has passed. An allowed take that
// leaves nothing and tells when the next unit frees (sluice.Decision.NextAfter: the Redis
// store's windows) counts as a denial of one unit until then. Allowed requests, peeks
// and refunds always go to the store, so allows are exactly as accurate as the store's, and a
// denial served from the cache is one the store would have given (nothing is admitted
// meanwhile by this key's cached requests; other instances can only consume more).
//
// A key once denied makes at most one store call at a time (single flight): when its cached
// denial has passed, or a request is not covered by it (fewer units), the first request goes
// to the store and concurrent requests of the key under the same rule wait for that call
// instead of making their own, each no longer than its context allows (then failing with
// sluice.ErrStoreUnavailable and the context's error, as a store call would). When the call
// was denied, its denial answers those it covers. When it was admitted with Remaining units
// left, as many waiters as that go to the store on their own (all of them if there is room
// for all and the key is back under half its capacity), and the next of the others makes the
// key's next call. When it failed, or its caller gave up, they all go to the store on their own,
// as without the cache, and the key's next request probes it again. A request waits for at
// most three calls in a row before making its own. So a hot key over its limit costs its
// store about two calls per RetryAfter instead of one per concurrent caller, every allow
// still comes from the store, and a key never denied pays nothing for it.
//
// Waits (Request.MaxDelay > 0, from Limiter.Wait) and settles (Request.Settle, which
// apply whatever the limit) bypass the cache and never wait; a settle that changes the state
// drops the entry. A request with a different Rule than the cached denial (a dynamic limit
// change) drops the entry and goes to the store. A refund drops it too. Memory is bounded by
// WithMaxKeys.
//
// OverLimit is safe for concurrent use. Serving a cached denial allocates nothing.
type OverLimit struct {
	next    sluice.Store
	clock   sluice.Clock
	denials *shardmap.Map[denial]
	waiting atomic.Int64 // requests waiting for their key's store call
}

// maxWaits is how many store calls of a key in a row a request waits for before it makes its
// own.
const maxWaits = 3

// denial is a cached store denial; once until has passed, the mark of a key that was over its
// limit, whose requests share one store call.
type denial struct {
	rule      sluice.Rule
	n         int64 // the smallest cost known to be denied
	until     int64 // Unix ns at which the denied request would be allowed
	resetAt   int64 // Unix ns at which the key is back to full
	remaining int64
	flight    *flight // the key's store call in flight, nil if none
}

// flight is a store call of a key that concurrent requests of the key wait for.
type flight struct {
	done    chan struct{} // closed when the call has returned and its result is cached
	waiters int64         // the requests that waited for it; under the shard's lock
	// passes, set before done is closed, is how many waiters go to the store on their own
	// (each takes one): all of them when the call failed or left room for them all, as many
	// as it left units when fewer, none when it was denied (its denial answers them). The
	// others try the cache again, where the next of them makes the key's next call.
	passes atomic.Int64
}

// denialRemaining lets a full shard drop the denial that expires soonest, never one whose key
// has a call in flight.
func denialRemaining(e denial, now int64) int64 {
	if e.flight != nil {
		return shardmap.Pinned
	}
	return e.until - now
}

// decision is the cached denial's answer at t.
func (e *denial) decision(t int64) sluice.Decision {
	return sluice.Decision{Capacity: e.rule.Capacity(), Remaining: e.remaining,
		RetryAfter: time.Duration(e.until - t), ResetAfter: time.Duration(max(0, e.resetAt-t))}
}

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
	return o.take(ctx, req, false)
}

// TakeCountingDenied implements sluice.DeniedCounter, as envoyproxy/ratelimit's local cache
// counts hits: a take that goes to the store and is denied there is charged all the same (by
// the store's own TakeCountingDenied, or a settle), before its denial is cached; a denial
// answered from the cache, or from a call the request waited for, is not charged. A charge
// past the limit only delays when the key frees, so a cached denial stays one the store
// would give.
func (o *OverLimit) TakeCountingDenied(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	return o.take(ctx, req, true)
}

// take is Take, and with count TakeCountingDenied.
func (o *OverLimit) take(ctx context.Context, req sluice.Request, count bool) (sluice.Decision, error) {
	if !decidesNow(&req) {
		return o.call(ctx, &req, nil, count)
	}
	sh := o.denials.Shard(req.Key)
	for waits := 0; ; waits++ {
		t := now(o.clock)
		sh.Lock()
		e, ok := sh.Get(req.Key)
		switch {
		case !ok:
		case e.rule != req.Rule:
			if e.flight == nil {
				sh.Delete(req.Key)
			}
		case t < e.until && req.N >= e.n:
			sh.Unlock()
			return e.decision(t), nil
		case e.flight == nil: // lead the key's store call
			f := &flight{done: make(chan struct{})}
			e.flight = f
			sh.Set(req.Key, e)
			sh.Unlock()
			return o.call(ctx, &req, f, count)
		case waits < maxWaits:
			f := e.flight
			f.waiters++
			sh.Unlock()
			if err := o.wait(ctx, f); err != nil {
				return sluice.Decision{}, err
			}
			if f.passes.Add(-1) >= 0 {
				return o.call(ctx, &req, nil, count)
			}
			continue
		}
		sh.Unlock()
		return o.call(ctx, &req, nil, count)
	}
}

// wait waits for flight f to land, or for ctx to end: then it returns an error wrapping
// sluice.ErrStoreUnavailable and the context's error, as a store call would.
func (o *OverLimit) wait(ctx context.Context, f *flight) error {
	o.waiting.Add(1)
	defer o.waiting.Add(-1)
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("distributed: over-limit cache: waiting for the store: %w: %w", sluice.ErrStoreUnavailable, ctx.Err())
	}
}

// errNoReturn stands for the result of a store call that panicked.
var errNoReturn = errors.New("distributed: the store call did not return")

// call passes req to the store and caches what the answer tells about its key. f is the key's
// flight that req leads, or nil; call lands it whatever happens, a panic included. With
// count, a take the store denies is charged all the same (sluice.TakeCountingDenied).
func (o *OverLimit) call(ctx context.Context, req *sluice.Request, f *flight, count bool) (d sluice.Decision, err error) {
	if f == nil {
		d, err = o.pass(ctx, req, count)
		o.land(req, nil, d, err)
		return d, err
	}
	err = errNoReturn
	defer func() { o.land(req, f, d, err) }()
	d, err = o.pass(ctx, req, count)
	return d, err
}

// pass decides req on the wrapped store, counting a denied take with count.
func (o *OverLimit) pass(ctx context.Context, req *sluice.Request, count bool) (sluice.Decision, error) {
	if count {
		return sluice.TakeCountingDenied(ctx, o.next, *req)
	}
	return o.next.Take(ctx, *req)
}

// land caches what the store's answer (d, err) to req tells: a denial to serve, or that a
// cached one no longer holds. With f, the flight req led, it clears the key's flight and
// releases its waiters, telling how many of them go to the store on their own.
func (o *OverLimit) land(req *sluice.Request, f *flight, d sluice.Decision, err error) {
	sh := o.denials.Shard(req.Key)
	t := now(o.clock)
	passes := int64(math.MaxInt64)
	sh.Lock()
	if e, ok := sh.Get(req.Key); ok && f != nil && e.flight == f {
		e.flight = nil
		sh.Set(req.Key, e)
	}
	switch {
	case err != nil:
	case !d.Allowed && d.RetryAfter > 0 && decidesNow(req):
		putDenial(sh, req.Key, denial{rule: req.Rule, n: req.N, until: t + int64(d.RetryAfter),
			resetAt: t + int64(d.ResetAfter), remaining: d.Remaining}, t)
		passes = 0
	case d.Allowed && d.Remaining == 0 && d.NextAfter > 0 && decidesNow(req):
		// A take that left nothing and tells when the next unit frees: until then the store
		// would deny every take, so the key's next requests are denied here (which spares the
		// call that would learn it).
		putDenial(sh, req.Key, denial{rule: req.Rule, n: 1, until: t + int64(d.NextAfter),
			resetAt: t + int64(d.ResetAfter)}, t)
		passes = 0
	case d.Allowed && req.N != 0:
		// A refund, or an allow: the state has changed, the cached denial no longer holds.
		// An answer that leaves the key near its limit (under half its capacity, or less
		// room than the call had waiters) keeps the key's mark, so that its requests keep
		// sharing calls: as many waiters as it left units go to the store, the next of the
		// others makes the key's next call.
		near := 2*d.Remaining < req.Rule.Capacity() || (f != nil && d.Remaining < f.waiters)
		if near && expireDenial(sh, req.Key, req.Rule, t) {
			passes = d.Remaining
		} else {
			dropDenial(sh, req.Key, t)
		}
	}
	sh.Unlock()
	if f != nil {
		f.passes.Store(passes)
		close(f.done)
	}
}

// expireDenial ends key's cached denial under rule at t, keeping the entry as the key's mark,
// and reports whether there was one.
func expireDenial(sh *shardmap.Shard[denial], key string, rule sluice.Rule, t int64) bool {
	e, ok := sh.Get(key)
	if !ok || e.rule != rule {
		return false
	}
	e.until = min(e.until, t)
	sh.Set(key, e)
	return true
}

// dropDenial drops key's cached denial; an entry whose key has a call in flight stays, expired,
// for that call's waiters.
func dropDenial(sh *shardmap.Shard[denial], key string, t int64) {
	e, ok := sh.Get(key)
	switch {
	case !ok:
	case e.flight != nil:
		e.until = min(e.until, t)
		sh.Set(key, e)
	default:
		sh.Delete(key)
	}
}

// putDenial caches e under key, keeping the smallest denied cost when one is already cached,
// and the key's flight.
func putDenial(sh *shardmap.Shard[denial], key string, e denial, t int64) {
	if old, ok := sh.Get(key); ok {
		if old.rule == e.rule && old.until > t && old.n < e.n {
			return // a smaller cost is already known to be denied
		}
		e.flight = old.flight
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
// holdback): the kinds a cached denial answers. A wait may be admitted ahead, a settle
// whatever the key holds, and a peek or a refund consumes nothing.
func decidesNow(req *sluice.Request) bool {
	k := req.Kind()
	return k == sluice.KindTake || k == sluice.KindTakeHoldback
}
