package sluice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Slot is the outcome of Leases.Acquire: the decision and, when admitted, the lease that holds
// the slot until Release. The Leases renews the lease while it is held. A Slot is a small
// value: copies name the same lease, and releasing it through any of them releases it once.
type Slot struct {
	LeaseDecision
	ls  *Leases
	key string
	id  LeaseID
}

// Release gives the slot back. It is idempotent and safe to call on a refused Slot or the
// zero Slot (both do nothing): a second release, or a release after the lease expired, never
// frees someone else's slot. An error means the store could not be told (counted in
// Leases.FailedReleases); the lease then expires within its lease time, as it stops being
// renewed now.
func (s Slot) Release() error {
	if !s.Admitted || s.ls == nil {
		return nil
	}
	return s.ls.release(s.key, s.id)
}

// ID returns the slot's lease id (the zero LeaseID for a refused Slot).
func (s Slot) ID() LeaseID { return s.id }

// Acquire takes one slot of key under limit, at most limit.Limit held at once across every
// process sharing the store. It does not wait: a refusal is a Slot with Admitted false
// (RetryAfter is a hint), not an error. An admitted Slot must be released (defer
// slot.Release()); until then the Leases renews its lease in the background, one batched
// renewal per half lease for all the leases it holds, so a slot outlives any request, while
// the slots of a process that dies come back within the lease time.
//
// Errors are for bad input (a *FieldError), a store that keeps no leases (ErrNoLeaser) and
// an unavailable store. When the store failed (a timeout, say), it may have taken the slot
// all the same: the lease is then released in the background, best effort.
func (ls *Leases) Acquire(ctx context.Context, key string, limit InFlight) (Slot, error) {
	return ls.acquire(ctx, LeaseRequest{Key: key, InFlight: limit})
}

// AcquireClass is Acquire for a request of criticality class c: it is admitted only if, after
// it, the holdback of the classes above c stays free (limit.Limit minus c's share, WithShares,
// as for Limiter.AllowClass), so a sheddable request cannot take the last slots kept for
// critical ones. Remaining is what c may still take. A CRITICAL_PLUS request (share 100%) is
// decided as Acquire.
func (ls *Leases) AcquireClass(ctx context.Context, key string, limit InFlight, c Criticality) (Slot, error) {
	return ls.acquire(ctx, LeaseRequest{Key: key, InFlight: limit, Holdback: ls.shares.Holdback(c, limit.Limit), Criticality: c})
}

func (ls *Leases) acquire(ctx context.Context, req LeaseRequest) (Slot, error) {
	if ls.leaser == nil {
		return Slot{}, ls.err
	}
	req.ID = ls.newID()
	d, err := ls.leaser.AcquireLease(ctx, req)
	if err != nil {
		if fe := (*FieldError)(nil); !errors.As(err, &fe) {
			ls.abandon(req.Key, req.ID)
		}
		return Slot{LeaseDecision: d}, err
	}
	if !d.Admitted {
		return Slot{LeaseDecision: d}, nil
	}
	ls.hold(req.Key, req.ID, req.InFlight.LeaseTime())
	return Slot{LeaseDecision: d, ls: ls, key: req.Key, id: req.ID}, nil
}

// maxAbandonedReleases bounds the best-effort releases of failed acquires in progress at
// once: past it (a store outage failing every acquire), the leases are left to expire.
const maxAbandonedReleases = 64

var errTooManyReleases = fmt.Errorf("sluice: a failed acquire's lease is left to expire: %d releases of failed acquires already under way", maxAbandonedReleases)

// abandon releases, in the background and best effort, the lease id of key whose acquire
// failed: the store may have taken the slot before the call failed (a timeout after the script
// ran), and nobody would release it. A release that fails, or finds too many in progress, is
// counted in FailedReleases.
func (ls *Leases) abandon(key string, id LeaseID) {
	select {
	case ls.pending <- struct{}{}:
	default:
		ls.releaseFailed(errTooManyReleases)
		return
	}
	key = strings.Clone(key) // the caller's key may point into a buffer it reuses
	go func() {
		defer func() { <-ls.pending }()
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		if err := ls.leaser.ReleaseLease(ctx, key, id); err != nil {
			ls.releaseFailed(err)
		}
	}()
}

// AcquireWait is Acquire that waits for a slot instead of being refused: it returns as soon
// as a slot is taken, or the last refusal (Admitted false, no error) when none was free within
// the wait bound (WithMaxWait, default the limit's lease time) and the context's deadline, or
// the context's error when it is cancelled first.
//
// Waiters of one Leases are served first come, first served per key and class: only the
// longest waiting one asks the store, at once when a slot of the key is released in this
// process and otherwise at the store's RetryAfter hint (at most every 50 ms). Across processes
// waiters are not ordered: each process's first waiter asks in turn. An Acquire that does not
// wait may take a freed slot before a waiter.
func (ls *Leases) AcquireWait(ctx context.Context, key string, limit InFlight) (Slot, error) {
	return ls.acquireWait(ctx, LeaseRequest{Key: key, InFlight: limit})
}

// AcquireClassWait is AcquireWait for a request of criticality class c (see AcquireClass). A
// class whose share of the limit is less than one slot is refused at once (RetryAfter Never).
func (ls *Leases) AcquireClassWait(ctx context.Context, key string, limit InFlight, c Criticality) (Slot, error) {
	return ls.acquireWait(ctx, LeaseRequest{Key: key, InFlight: limit, Holdback: ls.shares.Holdback(c, limit.Limit), Criticality: c})
}

func (ls *Leases) acquireWait(ctx context.Context, req LeaseRequest) (Slot, error) {
	wait := ls.maxWait
	if wait <= 0 {
		wait = req.InFlight.LeaseTime()
	}
	end := ls.clock.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	s, err := ls.acquire(ctx, req)
	if err != nil || s.Admitted || s.RetryAfter < 0 {
		return s, err
	}
	w := ls.enqueue(req.Key, req.Criticality)
	defer ls.dequeue(w)
	if err := ls.waitTurn(ctx, w, end); err != nil || !w.head {
		return s, err
	}
	for {
		if s, err = ls.acquire(ctx, req); err != nil || s.Admitted || s.RetryAfter < 0 {
			return s, err
		}
		left := end.Sub(ls.clock.Now())
		if left <= 0 {
			return s, nil
		}
		poll := min(left, max(s.RetryAfter, time.Millisecond), maxWaitPoll)
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-w.wake:
		case <-ls.clock.After(poll):
		}
	}
}

// maxWaitPoll is the longest a waiter goes without asking the store again.
const maxWaitPoll = 50 * time.Millisecond

// waitTurn blocks until w is the first waiter of its queue (w.head), end passes (w.head still
// false) or the context ends.
func (ls *Leases) waitTurn(ctx context.Context, w *waiter, end time.Time) error {
	for !ls.isHead(w) {
		left := end.Sub(ls.clock.Now())
		if left <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.wake:
		case <-ls.clock.After(left):
		}
	}
	w.head = true
	return nil
}

// release drops the lease from the renewer and frees it in the store, then wakes this
// process's waiters on the key.
func (ls *Leases) release(key string, id LeaseID) error {
	if !ls.drop(id) {
		return nil // already released (or lost at renewal)
	}
	var err error
	if ls.local {
		err = ls.leaser.ReleaseLease(context.Background(), key, id)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		err = ls.leaser.ReleaseLease(ctx, key, id)
		cancel()
	}
	if err != nil {
		ls.releaseFailed(err)
	}
	ls.notify(key)
	return err
}

// releaseFailed counts a release the store could not take and reports it (OnReleaseError).
func (ls *Leases) releaseFailed(err error) {
	ls.failed.Add(1)
	if ls.onReleaseError != nil {
		ls.onReleaseError(err)
	}
}

// releaseTimeout bounds a release on a shared store.
const releaseTimeout = 2 * time.Second
