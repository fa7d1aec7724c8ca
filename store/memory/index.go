package memory

import (
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// A shard's index is an open-addressing table (linear probing) from the 64-bit hash of a key
// to its entry. Lookups read it with no lock: they write no shared memory, so decisions on
// different keys from different cores touch no common cache line but the table's, which they
// only read. Inserts, removals and growth take the shard's mutex; growth builds a new table and
// publishes it with one atomic store. Each entry has its own mutex for its state.
//
// Removal marks the entry dead (under its mutex) before it leaves the table, so a lookup that
// found it in a table it read before, locks it and sees it dead starts again; a removed slot
// keeps its hash as a tombstone, so probes for other keys run past it; lookups stop at a slot
// never used. Tombstones are dropped when the table is rebuilt.

// slot is one position of a table: hash 0 is a slot never used; a nil entry with a hash, a
// tombstone.
type slot struct {
	h atomic.Uint64
	e atomic.Pointer[entry]
}

type table struct {
	slots []slot
	mask  uint64
}

const minTable = 8

func newTable(capacity int) *table {
	n := minTable
	for n < capacity {
		n <<= 1
	}
	return &table{slots: make([]slot, n), mask: uint64(n - 1)}
}

// home is where the probe for hash h starts: the hash's high bits (its low bits chose the
// shard).
func (t *table) home(h uint64) uint64 { return (h >> 32) & t.mask }

// find returns key's entry, or nil. It runs concurrently with writers: a nil answer means the
// key was absent at some instant during the call; the caller confirms under the shard's lock.
func (t *table) find(h uint64, key string) *entry {
	for i := t.home(h); ; i = (i + 1) & t.mask {
		sl := &t.slots[i]
		switch sl.h.Load() {
		case 0:
			return nil
		case h:
			if e := sl.e.Load(); e != nil && e.key == key {
				return e
			}
		}
	}
}

// shard is one lock domain for writers of the index. Lookups read only tab.
type shard struct {
	tab  atomic.Pointer[table]
	mu   sync.Mutex // serialises writers of tab: insert, remove, rebuild
	n    int        // live entries
	used int        // slots with a hash in tab: live entries and tombstones
	_    [96]byte   // keep shards on separate cache-line pairs (adjacent-line prefetch)
}

// insert adds e under h; sh.mu is held and the key is absent. The table is rebuilt first when
// it would be more than 3/4 used, to twice the live entries.
func (sh *shard) insert(h uint64, e *entry) {
	t := sh.tab.Load()
	if (sh.used+1)*4 > len(t.slots)*3 {
		t = sh.rebuild(2 * (sh.n + 1))
	}
	for i := t.home(h); ; i = (i + 1) & t.mask {
		sl := &t.slots[i]
		if sl.e.Load() != nil {
			continue
		}
		if sl.h.Load() == 0 {
			sh.used++
		}
		sl.e.Store(e)
		sl.h.Store(h)
		sh.n++
		return
	}
}

// rebuild replaces the table with one of at least capacity slots holding the live entries;
// sh.mu is held.
func (sh *shard) rebuild(capacity int) *table {
	old := sh.tab.Load()
	t := newTable(capacity)
	for i := range old.slots {
		if e := old.slots[i].e.Load(); e != nil {
			h := old.slots[i].h.Load()
			j := t.home(h)
			for t.slots[j].h.Load() != 0 {
				j = (j + 1) & t.mask
			}
			t.slots[j].e.Store(e)
			t.slots[j].h.Store(h)
		}
	}
	sh.used = sh.n
	sh.tab.Store(t)
	return t
}

// kill removes e, held in sl of the current table; sh.mu and e.mu are held. It marks the entry
// dead, so a lookup holding it starts again.
func (sh *shard) kill(sl *slot, e *entry, bytes *atomic.Int64) {
	e.dead = true
	sl.e.Store(nil)
	sh.n--
	bytes.Add(-int64(e.bytes))
}

// remove kills the entry of sl, a slot of sh's current table; sh.mu is held.
func (sh *shard) remove(sl *slot, bytes *atomic.Int64) {
	e := sl.e.Load()
	e.mu.Lock()
	sh.kill(sl, e, bytes)
	e.mu.Unlock()
}

// entry is one key's state: 128 bytes, which Go allocates 128-byte aligned, so the fields a
// decision writes (the mutex, the expiry and a small state held inline) fill the first cache
// line and the key, which decisions only read, the second. Decisions on one key from two cores
// then move one line between them, not two or three. key, once published in a table, never
// changes; the other fields are guarded by mu.
type entry struct {
	mu      sync.Mutex
	dead    bool              // removed from the index
	coarse  bool              // decisions under params read the coarse clock (Store.coarseFor)
	seen    uint16            // when it was first decided, and whether it was since (evict.go)
	bytes   uint32            // the entry's charge against WithMaxBytes (entryBytes)
	expires int64             // Unix ns at which the state is back to full
	params  *algorithm.Params // the rule of the last decision, compiled
	state   algorithm.State   // points at small for the algorithms whose state fits in it
	small   [2]int64
	key     string   // points at buf when the key fits in it
	buf     [48]byte // the key's bytes, when it fits
}

// newEntry returns an entry for key (copied) in the empty state of algorithm a.
func newEntry(a sluice.Algorithm, key string, p *algorithm.Params) *entry {
	e := &entry{params: p}
	e.state = e.newState(a)
	if len(key) <= len(e.buf) {
		n := copy(e.buf[:], key)
		e.key = unsafe.String(&e.buf[0], n)
	} else {
		e.key = strings.Clone(key)
	}
	return e
}

// newState returns the empty state of algorithm a, held in e.small when it fits: the states of
// the four algorithms stored there are structs of at most two int64s, the layout of small.
func (e *entry) newState(a sluice.Algorithm) algorithm.State {
	e.small = [2]int64{}
	p := unsafe.Pointer(&e.small)
	switch a {
	case sluice.AlgorithmGCRA:
		return (*algorithm.GCRA)(p)
	case sluice.AlgorithmTokenBucket:
		return (*algorithm.TokenBucket)(p)
	case sluice.AlgorithmLeakyBucket:
		return (*algorithm.LeakyBucket)(p)
	case sluice.AlgorithmFixedWindow:
		return (*algorithm.FixedWindow)(p)
	}
	return algorithm.New(a)
}

// apply decides req, which is not a plain take, on e's state at now (algorithm.Apply): a
// budget step on the key's ledger, which e's state becomes at the first. e.mu is held.
func (e *entry) apply(now int64, req *sluice.Request) (sluice.Decision, error) {
	if req.Kind().Budget() {
		e.state = algorithm.WithLedger(e.state)
	}
	return algorithm.Apply(e.state, now, e.params, req)
}

// until is when e may be removed: once its state is back to full (expires) and its open
// budget reservations, if any, have expired. A ledger's open reservations are kept apart from
// WithMaxBytes' charge (at most sluice.MaxOpenReservations of 64 bytes per key). e.mu is held.
func (e *entry) until() int64 {
	if l, ok := e.state.(*algorithm.Ledger); ok {
		return max(e.expires, l.Expiry())
	}
	return e.expires
}
