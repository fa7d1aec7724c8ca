package sluice

import "context"

// DeniedCounter is a Store that decides a take whose cost is charged even when it is denied,
// as envoyproxy/ratelimit counts the hits of requests over their limit (its default; Sluice's
// service does so with --count-denied). A store implements it when it can do better than
// TakeCountingDenied's generic take-then-settle: an over-limit cache answers a cached denial
// without its store and so charges nothing for it, as the peer's local cache does.
type DeniedCounter interface {
	// TakeCountingDenied decides req as Take does and, when req is a take that its store
	// denies, charges req.N all the same (a settle of at most MaxLimit units, so the key goes
	// into debt). The Decision is the take's. A denial answered without the store (from a
	// cache) charges nothing. Other kinds of request are decided as by Take.
	TakeCountingDenied(ctx context.Context, req Request) (Decision, error)
}

// TakeCountingDenied decides req on store and, when req is a take that is denied, charges its
// cost all the same: by store's own TakeCountingDenied when it is a DeniedCounter, otherwise by
// a Take and, on a denial, a settle of min(req.N, MaxLimit) units (an error of that settle is
// returned with the take's Decision). The Decision is the take's.
func TakeCountingDenied(ctx context.Context, store Store, req Request) (Decision, error) {
	if c, ok := store.(DeniedCounter); ok {
		return c.TakeCountingDenied(ctx, req)
	}
	d, err := store.Take(ctx, req)
	if err != nil || d.Allowed || !req.Kind().Takes() {
		return d, err
	}
	return d, ChargeDenied(ctx, store, req)
}

// ChargeDenied charges the cost of req, a take its store denied, whatever the limit: a settle
// of min(req.N, MaxLimit) units on req's key and rule (see TakeCountingDenied).
func ChargeDenied(ctx context.Context, store Store, req Request) error {
	_, err := store.Take(ctx, Request{Key: req.Key, Rule: req.Rule, N: min(req.N, MaxLimit), Settle: true, Criticality: req.Criticality})
	return err
}

// AllowCountingDenied decides check c alone (as AllowAll decides one check: its holdback, its
// class) and, when it is denied, charges its cost all the same (TakeCountingDenied): the
// decision of envoyproxy/ratelimit, which counts the hits of requests over their limit. It
// sets c.Decision and returns it. c.N must be positive.
func (l *Limiter) AllowCountingDenied(ctx context.Context, c *Check) (Decision, error) {
	if l.store == nil {
		return Decision{}, ErrNoStore
	}
	req := Request{Key: c.Key, Rule: c.Rule, N: c.N, Criticality: c.Criticality, Holdback: c.Holdback}
	var d Decision
	var err error
	if _, ok := l.store.(DeniedCounter); ok || !l.plain(c.Holdback, c.Criticality) {
		d, err = TakeCountingDenied(ctx, l.store, req)
	} else { // AllowN: the memory store's fast path
		d, err = l.AllowN(ctx, c.Key, c.Rule, c.N)
		if err == nil && !d.Allowed {
			err = ChargeDenied(ctx, l.store, req)
		}
	}
	c.Decision = d
	return d, err
}
