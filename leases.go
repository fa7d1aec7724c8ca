package sluice

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// leases is what a Limiter keeps of the slots it holds: the leases to renew and the queues of
// AcquireWait's waiters. Its renewer goroutine starts with the first lease and stops on Close.
type leases struct {
	prefix  [8]byte
	counter atomic.Uint64
	lost    atomic.Int64
	waiting atomic.Int64 // AcquireWait's waiters: a release with none skips the queues' lock

	mu       sync.Mutex
	held     map[LeaseID]heldLease
	queues   map[queueKey]*waitQueue
	next     time.Time // when the renewer wakes next (zero: no lease held)
	running  bool
	closed   bool
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	prefixed sync.Once
}

type heldLease struct {
	key   string
	lease time.Duration
	due   time.Time // when to renew it next
}

// newID returns a lease id no other Limiter, here or elsewhere, makes: a random 64-bit prefix
// per Limiter and a counter.
func (ls *leases) newID() LeaseID {
	ls.prefixed.Do(func() { binary.BigEndian.PutUint64(ls.prefix[:], rand.Uint64()) }) // seeded by the runtime's random source
	var id LeaseID
	copy(id[:8], ls.prefix[:])
	binary.BigEndian.PutUint64(id[8:], ls.counter.Add(1))
	return id
}

// hold registers a lease for renewal, starting the renewer if needed.
func (ls *leases) hold(l *Limiter, key string, id LeaseID, lease time.Duration) {
	due := l.clock.Now().Add(lease / 2)
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
		ls.wake = make(chan struct{}, 1)
		ls.stop = make(chan struct{})
		ls.done = make(chan struct{})
	}
	ls.mu.Unlock()
	switch {
	case start:
		go ls.renewLoop(l)
	case earlier:
		ls.poke()
	}
}

func (ls *leases) poke() {
	select {
	case ls.wake <- struct{}{}:
	default:
	}
}

// drop unregisters a lease and reports whether it was held.
func (ls *leases) drop(id LeaseID) bool {
	ls.mu.Lock()
	_, ok := ls.held[id]
	if ok {
		delete(ls.held, id)
	}
	ls.mu.Unlock()
	return ok
}

func (ls *leases) count() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.held)
}

func (ls *leases) close() {
	ls.mu.Lock()
	running := ls.running
	if !ls.closed && running {
		close(ls.stop)
	}
	ls.closed = true
	ls.mu.Unlock()
	if running {
		<-ls.done
	}
}

// renewLoop renews the leases that are due, in one batch per wake-up, until Close.
func (ls *leases) renewLoop(l *Limiter) {
	defer close(ls.done)
	var batch []LeaseRenewal
	for {
		ls.mu.Lock()
		next := ls.next
		ls.mu.Unlock()
		var after <-chan time.Time
		if !next.IsZero() {
			after = l.clock.After(next.Sub(l.clock.Now()))
		}
		select {
		case <-ls.stop:
			return
		case <-ls.wake:
			continue
		case <-after:
		}
		batch = ls.renewDue(l, batch[:0])
	}
}

// renewDue renews, in one store call, every lease due by now, then schedules the next
// wake-up. A lease the store no longer holds is dropped and counted lost; one whose renewal
// failed is tried again after a tenth of its lease.
func (ls *leases) renewDue(l *Limiter, batch []LeaseRenewal) []LeaseRenewal {
	now := l.clock.Now()
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
		err = l.leaser.RenewLeases(ctx, batch)
		cancel()
	}
	now = l.clock.Now()
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
func (ls *leases) enqueue(key string, c Criticality) *waiter {
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

func (ls *leases) isHead(w *waiter) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	q := ls.queues[w.q]
	return q != nil && len(q.waiters) > 0 && q.waiters[0] == w
}

// dequeue removes a waiter and wakes the next one, which is first now.
func (ls *leases) dequeue(w *waiter) {
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
func (ls *leases) notify(key string) {
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
