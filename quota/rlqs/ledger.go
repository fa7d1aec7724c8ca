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
	// alloc.Bucket.ReportPush): the other clients n.Local accepts are pushed their new
	// shares, and n.Assigned is told of every assignment made while no other call of this
	// Ledger on the same bucket runs.
	Report(ctx context.Context, key string, s *alloc.Settings, client string, class sluice.Criticality, now int64, count float64, elapsed time.Duration, n Notify) (alloc.Assignment, error)
	// Leave says client no longer reports for the bucket; what it holds counts until it
	// expires.
	Leave(ctx context.Context, key string, s *alloc.Settings, client string, now int64) error
}

// Notify is what a Ledger tells its caller of a report's assignments. Both functions may
// be nil.
type Notify struct {
	// Local reports whether client's stream is served by this replica: only those are
	// pushed new shares (the others learn theirs at their next report).
	Local func(client string) bool
	// Assigned is called with each assignment made at the report (the reporter's and the
	// pushed ones), in the order the bucket's state changed.
	Assigned func(client string, a alloc.Assignment)
}

// tell tells n.Assigned of a report's assignments.
func (n Notify) tell(client string, a alloc.Assignment, pushes []alloc.Push) {
	if n.Assigned == nil {
		return
	}
	n.Assigned(client, a)
	for _, p := range pushes {
		n.Assigned(p.Client, p.Assignment)
	}
}

// observedLedger is a Ledger that reports to the service's Observer (New hands it over).
type observedLedger interface{ observe(Observer) }

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
	n.tell(client, a, pushes)
	return a, nil
}

func (m *memoryLedger) Leave(_ context.Context, key string, s *alloc.Settings, client string, now int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mb := m.buckets[key]; mb != nil {
		mb.b.Leave(client)
		mb.b.Expire(s, now)
		if len(mb.b.Clients) == 0 {
			delete(m.buckets, key)
		}
	}
	m.sweep(now)
	return nil
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
