package sluice

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Leases holds slots of concurrency limits (InFlight) for one process, as leases in a store
// that keeps them (a Leaser): it takes them (Acquire, AcquireClass, and AcquireWait and
// AcquireClassWait, which queue for a slot), renews the ones it holds in the background and
// gives them back (Slot.Release). It is to concurrency what Limiter is to rates, beside it in
// the manner of golang.org/x/sync's semaphore.Weighted: most callers want Acquire and Release.
//
// A Leases keeps per-process state: the leases it holds, renewed in one batch per half lease
// by a goroutine that runs only while it holds one, and the queues of its waiters. One Leases
// serves any number of keys and limits; Leases in several processes sharing a store share its
// slots. Close stops the renewals. A Leases is safe for concurrent use.
type Leases struct {
	settings
	leaser Leaser
	err    error // why Acquire fails without a leaser: ErrNoStore or ErrNoLeaser
	local  bool  // the store decides in-process (store/memory): a release cannot block

	prefix   [8]byte
	prefixed sync.Once
	counter  atomic.Uint64
	lost     atomic.Int64
	failed   atomic.Int64 // releases the store could not take (FailedReleases)
	waiting  atomic.Int64 // AcquireWait's waiters: a release with none skips the queues' lock
	pending  chan struct{}

	mu      sync.Mutex
	held    map[LeaseID]heldLease
	queues  map[queueKey]*waitQueue
	next    time.Time // when the renewer wakes next (zero: no lease held)
	running bool
	closed  bool
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{} // closed when the last renewer started has returned
}

type heldLease struct {
	key   string
	lease time.Duration
	due   time.Time // when to renew it next
}

// NewLeases returns a Leases on store. Of the options, WithClock sets the clock of renewals
// and waits, WithMaxWait the bound of AcquireWait (default the limit's lease time) and
// WithShares the classes' shares of AcquireClass (default DefaultShares). A nil store makes
// every Acquire fail with ErrNoStore, one that is not a Leaser with ErrNoLeaser.
func NewLeases(store Store, opts ...Option) *Leases {
	ls := &Leases{settings: newSettings(opts), pending: make(chan struct{}, maxAbandonedReleases)}
	switch l, ok := store.(Leaser); {
	case store == nil:
		ls.err = ErrNoStore
	case !ok:
		ls.err = ErrNoLeaser
	default:
		ls.leaser = l
		_, ls.local = store.(localStore)
	}
	return ls
}

// Held returns how many slots this Leases holds (acquired, not yet released nor lost).
func (ls *Leases) Held() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.held)
}

// Lost returns how many held slots this Leases found expired when it renewed them (their
// holders outlived the lease without a renewal getting through, for example during a store
// outage longer than the lease): their slots may have gone to others meanwhile.
func (ls *Leases) Lost() int64 { return ls.lost.Load() }

// FailedReleases returns how many releases the store could not take: a Slot.Release that
// failed, and the best-effort release of a lease whose acquire failed (timed out, say, after
// the store may have taken the slot). Each such slot stays held until its lease expires.
func (ls *Leases) FailedReleases() int64 { return ls.failed.Load() }

// Close stops the background renewal of the leases held; those not released expire within
// their lease time (Release still frees them at once). It does not close the store. Close is
// idempotent; Acquire after Close still works, but its leases are not renewed.
func (ls *Leases) Close() error {
	ls.mu.Lock()
	if !ls.closed && ls.running {
		close(ls.stop)
	}
	ls.closed = true
	done := ls.done
	ls.mu.Unlock()
	if done != nil {
		<-done
	}
	return nil
}

// newID returns a lease id no other Leases, here or elsewhere, makes: a random 64-bit prefix
// per Leases and a counter.
func (ls *Leases) newID() LeaseID {
	ls.prefixed.Do(func() { binary.BigEndian.PutUint64(ls.prefix[:], rand.Uint64()) }) // seeded by the runtime's random source
	var id LeaseID
	copy(id[:8], ls.prefix[:])
	binary.BigEndian.PutUint64(id[8:], ls.counter.Add(1))
	return id
}

// hold registers a lease for renewal, starting the renewer if it is not running.
func (ls *Leases) hold(key string, id LeaseID, lease time.Duration) {
	due := ls.clock.Now().Add(lease / 2)
	ls.mu.Lock()
	if ls.held == nil {
		ls.held = make(map[LeaseID]heldLease)
	}
	ls.held[id] = heldLease{key: key, lease: lease, due: due}
	earlier := ls.next.IsZero() || due.Before(ls.next)
	if earlier {
		ls.next = due
	}
	start := !ls.running && !ls.closed
	if start {
		ls.running = true
		ls.wake, ls.stop, ls.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	}
	wake, stop, done := ls.wake, ls.stop, ls.done
	ls.mu.Unlock()
	switch {
	case start:
		go ls.renewLoop(wake, stop, done)
	case earlier && wake != nil:
		signal(wake)
	}
}

// drop unregisters a lease and reports whether it was held.
func (ls *Leases) drop(id LeaseID) bool {
	ls.mu.Lock()
	_, ok := ls.held[id]
	if ok {
		delete(ls.held, id)
	}
	ls.mu.Unlock()
	return ok
}

// renewLoop renews the leases that are due, in one batch per wake-up, until Close or until
// no lease is held (hold starts another).
func (ls *Leases) renewLoop(wake, stop, done chan struct{}) {
	defer close(done)
	var batch []LeaseRenewal
	for {
		ls.mu.Lock()
		next := ls.next
		if len(ls.held) == 0 {
			ls.running = false
			ls.mu.Unlock()
			return
		}
		ls.mu.Unlock()
		var after <-chan time.Time
		if !next.IsZero() {
			after = ls.clock.After(next.Sub(ls.clock.Now()))
		}
		select {
		case <-stop:
			return
		case <-wake:
			continue
		case <-after:
		}
		batch = ls.renewDue(batch[:0])
	}
}

// renewDue renews, in one store call, every lease due by now, then schedules the next
// wake-up. A lease the store no longer holds is dropped and counted lost; one whose renewal
// failed is tried again after a tenth of its lease.
func (ls *Leases) renewDue(batch []LeaseRenewal) []LeaseRenewal {
	now := ls.clock.Now()
	shortest := MaxLease
	ls.mu.Lock()
	for id, h := range ls.held {
		if !h.due.After(now) {
			batch = append(batch, LeaseRenewal{Key: h.key, ID: id, Lease: h.lease})
			shortest = min(shortest, h.lease)
		}
	}
	ls.mu.Unlock()
	var err error
	if len(batch) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), max(shortest/2, releaseTimeout))
		err = ls.leaser.RenewLeases(ctx, batch)
		cancel()
	}
	now = ls.clock.Now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for i := range batch {
		r := &batch[i]
		h, ok := ls.held[r.ID]
		switch {
		case !ok: // released meanwhile
		case err != nil || r.Err != nil:
			h.due = now.Add(h.lease / 10)
			ls.held[r.ID] = h
		case r.Held:
			h.due = now.Add(h.lease / 2)
			ls.held[r.ID] = h
		default:
			delete(ls.held, r.ID)
			ls.lost.Add(1)
		}
		batch[i] = LeaseRenewal{}
	}
	ls.next = time.Time{}
	for _, h := range ls.held {
		if ls.next.IsZero() || h.due.Before(ls.next) {
			ls.next = h.due
		}
	}
	return batch
}

// queueKey names a queue of waiters: one per key and class, so a waiter of a class that
// cannot be admitted does not hold back the classes that can.
type queueKey struct {
	key string
	c   Criticality
}

type waitQueue struct{ waiters []*waiter }

type waiter struct {
	q    queueKey
	wake chan struct{}
	head bool // set by the waiter itself once it is first
}

// enqueue appends a waiter to its key's and class's queue.
func (ls *Leases) enqueue(key string, c Criticality) *waiter {
	w := &waiter{q: queueKey{key, c}, wake: make(chan struct{}, 1)}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.queues == nil {
		ls.queues = make(map[queueKey]*waitQueue)
	}
	q := ls.queues[queueKey{key, c}]
	if q == nil {
		q = &waitQueue{}
		ls.queues[queueKey{key, c}] = q
	}
	q.waiters = append(q.waiters, w)
	ls.waiting.Add(1)
	return w
}

func (ls *Leases) isHead(w *waiter) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	q := ls.queues[w.q]
	return q != nil && len(q.waiters) > 0 && q.waiters[0] == w
}

// dequeue removes a waiter and wakes the next one, which is first now.
func (ls *Leases) dequeue(w *waiter) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	k := w.q
	q := ls.queues[k]
	if q == nil {
		return
	}
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			ls.waiting.Add(-1)
			break
		}
	}
	if len(q.waiters) == 0 {
		delete(ls.queues, k)
		return
	}
	signal(q.waiters[0].wake)
}

// notify wakes the first waiter of every class of key after a slot of it was released.
func (ls *Leases) notify(key string) {
	if ls.waiting.Load() == 0 {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.queues) == 0 {
		return
	}
	for c := range numCriticalities {
		if q := ls.queues[queueKey{key, c}]; q != nil && len(q.waiters) > 0 {
			signal(q.waiters[0].wake)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
