package rlqs

import (
	"sync"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
)

// DefaultMaxBucketMemory is Config.MaxBucketMemory's default.
const DefaultMaxBucketMemory = 256 << 20

// The costs charged to Config.MaxBucketMemory, measured (TestBucketMemoryBudget checks the
// live heap stays within the budget): a distinct bucket id costs its bytes about three times
// (the canonical key, the protobuf map's keys and values) plus a fixed part; a subscription
// (one stream reporting one bucket: its record, its map entries, its allocation state) a
// fixed part.
const (
	idCostPerByte = 3
	idCostFixed   = 512
	subCost       = 1024
)

// idEntry is one bucket id held once for every stream that reports it: key is the domain
// and the canonical id ("domain\x00" + quota.BucketKey), pb the id as last received (nil
// for a state key without its criticality entry).
type idEntry struct {
	key  string
	pb   *rlqspb.BucketId
	refs int
	cost int64
}

// idTable interns the bucket ids of every stream, within a byte budget.
type idTable struct {
	mu     sync.Mutex
	m      map[string]*idEntry
	used   int64
	budget int64
}

func newIDTable(budget int64) *idTable { return &idTable{m: make(map[string]*idEntry), budget: budget} }

// acquire returns the entry of key (made from pb when new), charging extra bytes more (a
// subscription's), or false when that would take the table past its budget.
func (t *idTable) acquire(key string, pb *rlqspb.BucketId, extra int64) (*idEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[key]
	cost := extra
	if e == nil {
		cost += idCostFixed + idCostPerByte*int64(len(key))
	}
	if t.used+cost > t.budget {
		return nil, false
	}
	if e == nil {
		e = &idEntry{key: key, pb: pb, cost: idCostFixed + idCostPerByte*int64(len(key))}
		t.m[key] = e
	}
	if e.pb == nil { // held so far as a state key only
		e.pb = pb
	}
	e.refs++
	t.used += cost
	return e, true
}

// release gives back one reference of e and extra bytes.
func (t *idTable) release(e *idEntry, extra int64) {
	if e == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.used -= extra
	if e.refs--; e.refs == 0 {
		delete(t.m, e.key)
		t.used -= e.cost
	}
}

// size returns the distinct ids held and the bytes charged.
func (t *idTable) size() (ids int, used int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m), t.used
}
