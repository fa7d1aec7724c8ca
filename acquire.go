package sluice

import (
	"context"
	"time"
)

// Slot is the outcome of Limiter.Acquire: the decision and, when admitted, the lease that holds
// the slot until Release. The Limiter renews the lease while it is held. A Slot is a small
// value: copies name the same lease, and releasing it through any of them releases it once.
type Slot struct {
	LeaseDecision
	l   *Limiter
	key string
	id  LeaseID
}

// Release gives the slot back. It is idempotent and safe to call on a refused Slot or the
// zero Slot (both do nothing): a second release, or a release after the lease expired, never
// frees someone else's slot. An error means the store could not be told; the lease then
// expires within its lease time, as it stops being renewed now.
func (s Slot) Release() error {
	if !s.Admitted || s.l == nil {
		return nil
	}
	return s.l.release(s.key, s.id)
}

// ID returns the slot's lease id (the zero LeaseID for a refused Slot).
func (s Slot) ID() LeaseID { return s.id }

// Acquire takes one slot of key under limit, at most limit.Limit held at once across every
// process sharing the limiter's store. It does not wait: a refusal is a Slot with Admitted
// false (RetryAfter is a hint), not an error. An admitted Slot must be released (defer
// slot.Release()); until then the Limiter renews its lease in the background, one batched
// renewal per half lease for all the leases it holds, so a slot outlives any request, while
// the slots of a process that dies come back within the lease time.
//
// The store must implement Leaser (every Sluice store does); otherwise Acquire fails with
// ErrNoLeaser. Errors are for bad input (a *FieldError) and an unavailable store.
func (l *Limiter) Acquire(ctx context.Context, key string, limit InFlight) (Slot, error) {
	return l.acquire(ctx, LeaseRequest{Key: key, Limit: limit})
}

// AcquireClass is Acquire for a request of criticality class c: it is admitted only if, after
// it, the reserve of the classes above c stays free (limit.Limit minus c's share, WithShares,
// as for AllowClass), so a sheddable request cannot take the last slots kept for critical
// ones. Remaining is what c may still take. A CRITICAL_PLUS request (share 100%) is decided as
// Acquire.
func (l *Limiter) AcquireClass(ctx context.Context, key string, limit InFlight, c Criticality) (Slot, error) {
	return l.acquire(ctx, LeaseRequest{Key: key, Limit: limit, Reserve: l.shares.Reserve(c, limit.Limit), Criticality: c})
}

func (l *Limiter) acquire(ctx context.Context, req LeaseRequest) (Slot, error) {
	if l.store == nil {
		return Slot{}, ErrNoStore
	}
	if l.leaser == nil {
		return Slot{}, ErrNoLeaser
	}
	req.ID = l.leases.newID()
	d, err := l.leaser.AcquireLease(ctx, req)
	if err != nil || !d.Admitted {
		return Slot{LeaseDecision: d}, err
	}
	l.leases.hold(l, req.Key, req.ID, req.Limit.LeaseTime())
	return Slot{LeaseDecision: d, l: l, key: req.Key, id: req.ID}, nil
}

// AcquireWait is Acquire that waits for a slot instead of being refused: it returns as soon
// as a slot is taken, or the last refusal (Admitted false, no error) when none was free within
// the wait bound (WithMaxWait, default the limit's lease time) and the context's deadline, or
// the context's error when it is cancelled first.
//
// Waiters of one Limiter are served first come, first served per key and class: only the
// longest waiting one asks the store, at once when a slot of the key is released in this
// process and otherwise at the store's RetryAfter hint (at most every 50 ms). Across processes
// waiters are not ordered: each process's first waiter asks in turn. An Acquire that does not
// wait may take a freed slot before a waiter.
func (l *Limiter) AcquireWait(ctx context.Context, key string, limit InFlight) (Slot, error) {
	return l.acquireWait(ctx, LeaseRequest{Key: key, Limit: limit})
}

// AcquireClassWait is AcquireWait for a request of criticality class c (see AcquireClass). A
// class whose share of the limit is less than one slot is refused at once (RetryAfter Never).
func (l *Limiter) AcquireClassWait(ctx context.Context, key string, limit InFlight, c Criticality) (Slot, error) {
	return l.acquireWait(ctx, LeaseRequest{Key: key, Limit: limit, Reserve: l.shares.Reserve(c, limit.Limit), Criticality: c})
}

func (l *Limiter) acquireWait(ctx context.Context, req LeaseRequest) (Slot, error) {
	wait := l.maxWait
	if wait <= 0 {
		wait = req.Limit.LeaseTime()
	}
	end := l.clock.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	s, err := l.acquire(ctx, req)
	if err != nil || s.Admitted || s.RetryAfter < 0 {
		return s, err
	}
	w := l.leases.enqueue(req.Key, req.Criticality)
	defer l.leases.dequeue(w)
	if err := l.waitTurn(ctx, w, end); err != nil || !w.head {
		return s, err
	}
	for {
		if s, err = l.acquire(ctx, req); err != nil || s.Admitted || s.RetryAfter < 0 {
			return s, err
		}
		left := end.Sub(l.clock.Now())
		if left <= 0 {
			return s, nil
		}
		poll := min(left, max(s.RetryAfter, time.Millisecond), maxWaitPoll)
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-w.wake:
		case <-l.clock.After(poll):
		}
	}
}

// maxWaitPoll is the longest a waiter goes without asking the store again.
const maxWaitPoll = 50 * time.Millisecond

// waitTurn blocks until w is the first waiter of its queue (w.head), end passes (w.head still
// false) or the context ends.
func (l *Limiter) waitTurn(ctx context.Context, w *waiter, end time.Time) error {
	for !l.leases.isHead(w) {
		left := end.Sub(l.clock.Now())
		if left <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.wake:
		case <-l.clock.After(left):
		}
	}
	w.head = true
	return nil
}

// release drops the lease from the renewer and frees it in the store, then wakes this
// process's waiters on the key.
func (l *Limiter) release(key string, id LeaseID) error {
	if !l.leases.drop(id) {
		return nil // already released (or lost at renewal)
	}
	var err error
	if l.local != nil {
		err = l.leaser.ReleaseLease(context.Background(), key, id)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		err = l.leaser.ReleaseLease(ctx, key, id)
		cancel()
	}
	l.leases.notify(key)
	return err
}

// releaseTimeout bounds a release on a shared store.
const releaseTimeout = 2 * time.Second

// HeldLeases returns how many slots this Limiter holds (acquired, not yet released nor lost).
func (l *Limiter) HeldLeases() int { return l.leases.count() }

// LostLeases returns how many held slots this Limiter found expired when it renewed them
// (their holders outlived the lease without a renewal getting through, for example during a
// store outage longer than the lease): their slots may have gone to others meanwhile.
func (l *Limiter) LostLeases() int64 { return l.leases.lost.Load() }

// Close stops the background renewal of the leases this Limiter holds; those not released
// expire within their lease time (Release still frees them at once). It does not close the
// store. Close is idempotent; Acquire after Close still works but its leases are not renewed.
func (l *Limiter) Close() error {
	l.leases.close()
	return nil
}
