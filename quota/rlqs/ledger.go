package rlqs

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/quota/alloc"
)

// Ledger holds the allocation state of every bucket: the clients that report for it, their
// demands and the shares they hold. Implementations are safe for concurrent use.
type Ledger interface {
	// Report records client's usage of the bucket named key under settings s at now (Unix
	// ns), its demand of criticality class, and returns the client's new assignment (see
	// alloc.Bucket.ReportPush): every assignment made (the reporter's, and those of the
	// other clients whose shares moved) is handed to n.Assigned.
	Report(ctx context.Context, key string, s *alloc.Settings, client string, class sluice.Criticality, now int64, count float64, elapsed time.Duration, n Notify) (alloc.Assignment, error)
	// Delivered records that client received assignment a (sent on its stream), so that
	// the larger share it held before is free, and hands the assignments that frees to
	// n.Assigned (alloc.Bucket.Delivered).
	Delivered(ctx context.Context, key string, s *alloc.Settings, client string, a alloc.Assignment, now int64, n Notify) error
	// Rebalance recomputes the bucket's shares without a report (alloc.Bucket.Rebalance),
	// e.g. when the share of a client that left has expired, handing the assignments made
	// to n.Assigned, and returns when to call it next (alloc.Bucket.NextRelease; 0: no
	// need).
	Rebalance(ctx context.Context, key string, s *alloc.Settings, now int64, n Notify) (next int64, err error)
	// Leave says client no longer reports for the bucket: what it holds counts until it
	// expires, or is freed at once (and handed to the others through n.Assigned) under
	// s.ReleaseOnLeave. It returns when to call Rebalance (0: no need).
	Leave(ctx context.Context, key string, s *alloc.Settings, client string, now int64, n Notify) (next int64, err error)
}

// Handed is an assignment a Ledger made to a client.
type Handed struct {
	Client string
	alloc.Assignment
	// Pending says the client was handed a larger share before, still counted: once this
	// assignment is sent, confirm it with Ledger.Delivered so the difference is freed.
	Pending bool
	// Waits says the reporter's share is short of its target while shrinks that free the
	// rest are in flight: another assignment follows once they are delivered.
	Waits bool
}

// Notify is what a Ledger tells its caller of the assignments it makes. Both functions may
// be nil.
type Notify struct {
	// Local reports whether client's stream is served by this replica: the others are
	// handed their assignments through the replica that serves them (a Ledger shared by
	// replicas), or not at all.
	Local func(client string) bool
	// Assigned is called with each assignment made to a local client, in the order the
	// bucket's state changed.
	Assigned func(h Handed)
}

// tell tells n.Assigned of h.
func (n Notify) tell(h Handed) {
	if n.Assigned != nil {
		n.Assigned(h)
	}
}

// handed returns the assignments of a recomputation: the reporter's (id, a; "" for none)
// and the pushes.
func handed(b *alloc.Bucket, id string, a alloc.Assignment, pushes []alloc.Push, now int64) []Handed {
	out := make([]Handed, 0, len(pushes)+1)
	if id != "" {
		waits := false
		for _, p := range pushes {
			waits = waits || p.Pending
		}
		out = append(out, Handed{Client: id, Assignment: a, Pending: b.Pending(id, now), Waits: waits && b.Lacks(id) > 0})
	}
	for _, p := range pushes {
		out = append(out, Handed{Client: p.Client, Assignment: p.Assignment, Pending: p.Pending})
	}
	return out
}

// leave applies a leave to b under s: Leave, or Release under s.ReleaseOnLeave (then the
// freed share is handed out at once).
func leave(b *alloc.Bucket, s *alloc.Settings, client string, now int64, local func(string) bool) []alloc.Push {
	if !s.ReleaseOnLeave {
		b.Leave(client)
		b.Expire(s, now)
		return nil
	}
	b.Release(client)
	return b.Rebalance(s, now, local, nil)
}

// observedLedger is a Ledger that reports to the service's Observer (New hands it over).
type observedLedger interface{ observe(Observer) }

// sharedLedger is a Ledger that other replicas share: New hands it the replica's id (the
// prefix of its clients' ids) and how to deliver an assignment another replica made to one
// of this replica's clients.
type sharedLedger interface {
	attach(replica string, deliver func(key string, h Handed))
}

// sweepEvery is how often the memory state drops the buckets nobody holds a share of.
const sweepEvery = 10 * time.Second

// memoryLedger is the Ledger of one replica.
type memoryLedger struct {
	mu        sync.Mutex
	buckets   map[string]*memBucket
	lastSweep int64
}

type memBucket struct {
	b alloc.Bucket
	s alloc.Settings // the settings of the last call, for the sweep
}

// NewMemoryLedger returns a Ledger held in this process: one replica owns the whole limit.
func NewMemoryLedger() Ledger { return &memoryLedger{buckets: make(map[string]*memBucket)} }

func (m *memoryLedger) Report(_ context.Context, key string, s *alloc.Settings, client string, class sluice.Criticality, now int64, count float64, elapsed time.Duration, n Notify) (alloc.Assignment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	mb := m.buckets[key]
	if mb == nil {
		mb = &memBucket{}
		m.buckets[key] = mb
	}
	mb.s = *s
	a, pushes := mb.b.ReportPush(s, client, class, now, count, elapsed, n.Local, nil)
	for _, h := range handed(&mb.b, client, a, pushes, now) {
		n.tell(h)
	}
	return a, nil
}

func (m *memoryLedger) Delivered(_ context.Context, key string, s *alloc.Settings, client string, a alloc.Assignment, now int64, n Notify) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mb := m.buckets[key]; mb != nil {
		for _, h := range handed(&mb.b, "", alloc.Assignment{}, mb.b.Delivered(s, client, a, now, n.Local, nil), now) {
			n.tell(h)
		}
	}
	return nil
}

func (m *memoryLedger) Rebalance(_ context.Context, key string, s *alloc.Settings, now int64, n Notify) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.buckets[key]
	if mb == nil {
		return 0, nil
	}
	for _, h := range handed(&mb.b, "", alloc.Assignment{}, mb.b.Rebalance(s, now, n.Local, nil), now) {
		n.tell(h)
	}
	if len(mb.b.Clients) == 0 {
		delete(m.buckets, key)
	}
	return mb.b.NextRelease(s, now), nil
}

func (m *memoryLedger) Leave(_ context.Context, key string, s *alloc.Settings, client string, now int64, n Notify) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.sweep(now)
	mb := m.buckets[key]
	if mb == nil {
		return 0, nil
	}
	for _, h := range handed(&mb.b, "", alloc.Assignment{}, leave(&mb.b, s, client, now, n.Local), now) {
		n.tell(h)
	}
	if len(mb.b.Clients) == 0 {
		delete(m.buckets, key)
	}
	return mb.b.NextRelease(s, now), nil
}

// sweep drops, every sweepEvery, the clients and buckets that are gone and hold nothing.
func (m *memoryLedger) sweep(now int64) {
	if now-m.lastSweep < int64(sweepEvery) {
		return
	}
	m.lastSweep = now
	for k, mb := range m.buckets {
		mb.b.Expire(&mb.s, now)
		if len(mb.b.Clients) == 0 {
			delete(m.buckets, k)
		}
	}
}

// buckets returns the number of buckets held (tests check memory stays bounded).
func (m *memoryLedger) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buckets)
}
