package distributed

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// Concurrency limits (sluice.Leaser) through the decorators. OverLimit and Async keep no lease
// state: they pass leases to the store they wrap. Fallback decides them locally while the
// store is down, with the fleet-wide budget it keeps for rates.

var (
	_ sluice.Leaser       = (*OverLimit)(nil)
	_ sluice.Leaser       = (*Async)(nil)
	_ sluice.Leaser       = (*Fallback)(nil)
	_ sluice.LeaseClearer = (*OverLimit)(nil)
	_ sluice.LeaseClearer = (*Async)(nil)
	_ sluice.LeaseClearer = (*Fallback)(nil)
)

// leaserOf returns next as a Leaser, or an error wrapping sluice.ErrNoLeaser.
func leaserOf(next sluice.Store) (sluice.Leaser, error) {
	if l, ok := next.(sluice.Leaser); ok {
		return l, nil
	}
	return nil, fmt.Errorf("distributed: %T: %w", next, sluice.ErrNoLeaser)
}

// passAcquire, passRenew and passRelease hand a lease call to next.
func passAcquire(ctx context.Context, next sluice.Store, req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	l, err := leaserOf(next)
	if err != nil {
		return sluice.LeaseDecision{}, err
	}
	return l.AcquireLease(ctx, req)
}

func passRenew(ctx context.Context, next sluice.Store, batch []sluice.LeaseRenewal) error {
	l, err := leaserOf(next)
	if err != nil {
		return err
	}
	return l.RenewLeases(ctx, batch)
}

func passRelease(ctx context.Context, next sluice.Store, key string, id sluice.LeaseID) error {
	l, err := leaserOf(next)
	if err != nil {
		return err
	}
	return l.ReleaseLease(ctx, key, id)
}

// passClear hands a clear to next.
func passClear(ctx context.Context, next sluice.Store, key string) (int64, error) {
	c, ok := next.(sluice.LeaseClearer)
	if !ok {
		return 0, fmt.Errorf("distributed: %T clears no leases: %w", next, sluice.ErrNoLeaser)
	}
	return c.ClearLeases(ctx, key)
}

// ClearLeases implements sluice.LeaseClearer on the wrapped store.
func (o *OverLimit) ClearLeases(ctx context.Context, key string) (int64, error) {
	return passClear(ctx, o.next, key)
}

// ClearLeases implements sluice.LeaseClearer on the wrapped store.
func (a *Async) ClearLeases(ctx context.Context, key string) (int64, error) {
	return passClear(ctx, a.next, key)
}

// ClearLeases implements sluice.LeaseClearer: the leases of key granted locally are dropped,
// and the store's are cleared (under the timeout, or at least a second); it returns both
// counts added up, and the store's error, if any, with the local ones dropped all the same.
func (f *Fallback) ClearLeases(ctx context.Context, key string) (int64, error) {
	now := f.now()
	f.leases.mu.Lock()
	var local int64
	for _, h := range f.leases.keys[key] {
		if h.local && h.expires > now {
			local++
		}
	}
	delete(f.leases.keys, key)
	f.leases.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, max(f.timeout, time.Second))
	defer cancel()
	n, err := passClear(cctx, f.next, key)
	return local + n, err
}

// AcquireLease implements sluice.Leaser: the wrapped store decides (no denial is cached).
func (o *OverLimit) AcquireLease(ctx context.Context, req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return passAcquire(ctx, o.next, req)
}

// RenewLeases implements sluice.Leaser on the wrapped store.
func (o *OverLimit) RenewLeases(ctx context.Context, batch []sluice.LeaseRenewal) error {
	return passRenew(ctx, o.next, batch)
}

// ReleaseLease implements sluice.Leaser on the wrapped store.
func (o *OverLimit) ReleaseLease(ctx context.Context, key string, id sluice.LeaseID) error {
	return passRelease(ctx, o.next, key, id)
}

// AcquireLease implements sluice.Leaser: leases are decided by the wrapped store at once (an
// in-flight count cannot be synchronised late).
func (a *Async) AcquireLease(ctx context.Context, req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return passAcquire(ctx, a.next, req)
}

// RenewLeases implements sluice.Leaser on the wrapped store.
func (a *Async) RenewLeases(ctx context.Context, batch []sluice.LeaseRenewal) error {
	return passRenew(ctx, a.next, batch)
}

// ReleaseLease implements sluice.Leaser on the wrapped store.
func (a *Async) ReleaseLease(ctx context.Context, key string, id sluice.LeaseID) error {
	return passRelease(ctx, a.next, key, id)
}

// fallbackLeases is what a Fallback knows of the leases acquired through it: each one's key
// and expiry on the Fallback's clock, and whether the store holds it or it was granted locally
// during an outage. The local decisions count both, so an instance's slots from before the
// outage use up its share too.
type fallbackLeases struct {
	mu   sync.Mutex
	keys map[string]map[sluice.LeaseID]heldLease
}

type heldLease struct {
	expires int64 // Unix ns, the Fallback's clock
	local   bool  // granted by the Fallback during an outage; the store never saw it
}

func (fl *fallbackLeases) put(key string, id sluice.LeaseID, h heldLease) {
	if fl.keys == nil {
		fl.keys = map[string]map[sluice.LeaseID]heldLease{}
	}
	m := fl.keys[key]
	if m == nil {
		m = map[sluice.LeaseID]heldLease{}
		fl.keys[key] = m
	}
	m[id] = h
}

// take removes a lease and reports what it was.
func (fl *fallbackLeases) take(key string, id sluice.LeaseID) (heldLease, bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	h, ok := fl.keys[key][id]
	if ok {
		delete(fl.keys[key], id)
		if len(fl.keys[key]) == 0 {
			delete(fl.keys, key)
		}
	}
	return h, ok
}

// live drops key's expired leases and returns how many remain and the soonest expiry.
func (fl *fallbackLeases) live(key string, now int64) (n, soonest int64) {
	for id, h := range fl.keys[key] {
		if h.expires <= now {
			delete(fl.keys[key], id)
			continue
		}
		if n == 0 || h.expires < soonest {
			soonest = h.expires
		}
		n++
	}
	return n, soonest
}

// AcquireLease implements sluice.Leaser: the store decides while it answers, however slowly;
// while it is down (the circuit open after K failures in a row), FailLocal grants slots
// locally up to this instance's share of the limit, max(1, Limit / live instances) (or the
// safe capacity), counting the slots this instance already holds in the store, so the fleet
// holds about one limit in all; FailOpen admits and FailClosed refuses (RetryAfter the probe
// interval). Slots granted locally stay local until released: they are renewed locally and
// never reach the store.
//
// A slow store is not a down one: an acquire it does not answer within the timeout fails
// with an error wrapping sluice.ErrStoreUnavailable (the caller's failure policy answers it,
// and sluice.Leases releases its lease id in the background) and is not decided locally; a
// late answer stands and opens no circuit; and while a timeout of a rate decision holds the
// circuit open, leases still ask the store. Otherwise the instances whose circuits opened
// would grant their shares locally on top of the slots the store still counts for the others:
// every instance's circuit opens at once on a slow store, and closes one after another
// (issue 31: 11-17 in flight for a limit of 10 while Redis was up but slow).
func (f *Fallback) AcquireLease(ctx context.Context, req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	if err := req.Validate(0); err != nil {
		return sluice.LeaseDecision{}, err
	}
	if f.closed.Load() {
		return sluice.LeaseDecision{}, fmt.Errorf("distributed: fallback: %w", sluice.ErrClosed)
	}
	if f.Circuit() != CircuitOpen || !f.down.Load() {
		d, local, err := f.storeLease(ctx, req)
		if !local {
			return d, err
		}
	}
	return f.acquireLocally(req)
}

// storeLease asks the store under the Fallback's timeout and reports whether the store is
// down, so that the acquire is decided locally: an error wrapping ErrStoreUnavailable, counted
// on the circuit (K in a row open it). A timeout is an error and no local decision (see
// AcquireLease); an answer, late or not, is the decision. An admitted lease is remembered for
// the local count.
func (f *Fallback) storeLease(ctx context.Context, req sluice.LeaseRequest) (d sluice.LeaseDecision, local bool, err error) {
	next, err := leaserOf(f.next)
	if err != nil {
		return sluice.LeaseDecision{}, false, err
	}
	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	d, err = next.AcquireLease(cctx, req)
	late := cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
	cancel()
	switch {
	case err == nil:
		f.breaker.succeeded()
		if d.Admitted {
			f.leases.mu.Lock()
			f.leases.put(req.Key, req.ID, heldLease{expires: f.now() + int64(req.InFlight.LeaseTime())})
			f.leases.mu.Unlock()
		}
		return d, false, nil
	case late:
		err = fmt.Errorf("%w (%v): %w: %w", errTimeout, f.timeout, sluice.ErrStoreUnavailable, err)
		f.storeFailed(err)
		return sluice.LeaseDecision{}, false, err
	case sluice.IsUnavailable(err):
		f.storeFailed(err)
		f.failed()
		return sluice.LeaseDecision{}, true, err
	}
	return d, false, err // bad input, or the caller's context ended
}

func (f *Fallback) now() int64 { return f.breaker.clock.Now().UnixNano() }

// acquireLocally applies the failure policy to an acquire the store could not decide.
func (f *Fallback) acquireLocally(req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	limit := req.InFlight.Limit
	switch f.policy(sluice.Rule{Limit: limit, Period: req.InFlight.LeaseTime()}) {
	case FailOpen:
		return sluice.LeaseDecision{Admitted: true, Capacity: limit, Remaining: limit}, nil
	case FailClosed:
		return sluice.LeaseDecision{Capacity: limit, RetryAfter: f.breaker.interval}, nil
	}
	fraction := f.ledger.fraction()
	share := limit
	holdback := req.Holdback
	if fraction < 1 {
		share = max(1, int64(float64(limit)*fraction))
		holdback = int64(float64(holdback) * fraction)
	}
	now := f.now()
	f.leases.mu.Lock()
	defer f.leases.mu.Unlock()
	n, soonest := f.leases.live(req.Key, now)
	d := algorithm.DecideLease(share, min(holdback, share), n, soonest, now)
	if d.Admitted {
		f.leases.put(req.Key, req.ID, heldLease{expires: now + int64(req.InFlight.LeaseTime()), local: true})
	}
	return d, nil
}

// RenewLeases implements sluice.Leaser: the leases granted locally are renewed locally, the
// others by the store (under the Fallback's timeout). While the store is down (see
// AcquireLease), the store's leases fail (Err) and are tried again by the caller; if the outage outlasts their lease they
// are lost, and their slots return to the fleet.
func (f *Fallback) RenewLeases(ctx context.Context, batch []sluice.LeaseRenewal) error {
	now := f.now()
	var remote []sluice.LeaseRenewal
	var at []int
	f.leases.mu.Lock()
	for i := range batch {
		r := &batch[i]
		if r.Err = r.Validate(0); r.Err != nil {
			continue
		}
		h, ok := f.leases.keys[r.Key][r.ID]
		if ok && h.local {
			r.Held = h.expires > now
			if r.Held {
				h.expires = now + int64(r.Lease)
				f.leases.keys[r.Key][r.ID] = h
			}
			continue
		}
		remote, at = append(remote, *r), append(at, i)
	}
	f.leases.mu.Unlock()
	if len(remote) == 0 {
		return nil
	}
	err := f.renewInStore(ctx, remote)
	f.leases.mu.Lock()
	defer f.leases.mu.Unlock()
	for j, i := range at {
		r := &batch[i]
		if err != nil {
			r.Held, r.Err = false, err
			continue
		}
		r.Held, r.Err = remote[j].Held, remote[j].Err
		if h, ok := f.leases.keys[r.Key][r.ID]; ok && r.Held {
			h.expires = now + int64(r.Lease)
			f.leases.keys[r.Key][r.ID] = h
		}
	}
	return nil
}

func (f *Fallback) renewInStore(ctx context.Context, batch []sluice.LeaseRenewal) error {
	if f.Circuit() == CircuitOpen && f.down.Load() {
		return fmt.Errorf("distributed: fallback: the store is down: %w", sluice.ErrStoreUnavailable)
	}
	next, err := leaserOf(f.next)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, max(f.timeout, time.Second))
	defer cancel()
	return next.RenewLeases(cctx, batch)
}

// ReleaseLease implements sluice.Leaser: a lease granted locally is released locally, any
// other by the store (a failure leaves it to expire there).
func (f *Fallback) ReleaseLease(ctx context.Context, key string, id sluice.LeaseID) error {
	h, ok := f.leases.take(key, id)
	if ok && h.local {
		return nil
	}
	next, err := leaserOf(f.next)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, max(f.timeout, time.Second))
	defer cancel()
	return next.ReleaseLease(cctx, key, id)
}
