// Package shardmap is the bounded map of string keys in which the distributed decorators keep
// their per-key state (Async's local views, OverLimit's cached denials): Shards shards, each a
// Go map behind its own mutex, padded so that two shards' locks never share a cache line.
//
// A full shard makes room for a new key by sampled eviction: it looks at up to Sample entries
// (map iteration starts at a random place, so they are a random sample) and drops the first
// that has expired, else the one with the least time remaining, as the map's Remaining
// function tells; entries that must stay report Pinned.
package shardmap

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
)

// Shards is the number of shards of a Map.
const Shards = 32

// Sample is the number of entries a full shard looks at to choose the one to drop.
const Sample = 8

// Pinned is the Remaining of an entry that must not be evicted.
const Pinned = math.MaxInt64

// Remaining says how long v has left at now (Unix ns), in a unit of the caller's choice: 0 or
// less means v has expired (Sweep drops it; a full shard drops it first), Pinned means it must
// not be evicted. It is called with the shard locked.
type Remaining[V any] func(v V, now int64) int64

// Map is a sharded map from string keys to values of type V, bounded to about maxKeys entries
// (maxKeys / Shards per shard, at least one). Operations on entries go through the key's Shard,
// under its lock, so a caller can read and update an entry in one critical section. Len,
// Clear and Sweep lock one shard at a time. A Map is safe for concurrent use.
type Map[V any] struct {
	seed   maphash.Seed
	next   atomic.Uint32 // the next shard Sweep visits
	shards [Shards]Shard[V]
}

// Shard is one shard of a Map. Its methods other than Lock and Unlock must be called with the
// shard locked.
type Shard[V any] struct {
	mu        sync.Mutex
	m         map[string]V
	marked    []V
	limit     int
	remaining Remaining[V]
	_         [128 - 56]byte // 128 bytes per shard: no two locks on one cache line
}

// New returns an empty Map bounded to about maxKeys entries (at least Shards), whose full
// shards evict by remaining.
func New[V any](maxKeys int, remaining Remaining[V]) *Map[V] {
	m := &Map[V]{seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i] = Shard[V]{m: make(map[string]V), limit: max(1, maxKeys/Shards), remaining: remaining}
	}
	return m
}

// Shard returns the shard that holds key.
func (m *Map[V]) Shard(key string) *Shard[V] {
	return &m.shards[maphash.String(m.seed, key)%Shards]
}

// At returns shard i, in [0, Shards).
func (m *Map[V]) At(i int) *Shard[V] { return &m.shards[i] }

// Len reports the number of entries, including expired ones not yet dropped.
func (m *Map[V]) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.Lock()
		n += len(sh.m)
		sh.Unlock()
	}
	return n
}

// Clear drops every entry and every mark.
func (m *Map[V]) Clear() {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.Lock()
		clear(sh.m)
		sh.ResetMarked()
		sh.Unlock()
	}
}

// Sweep drops the expired entries of one shard, the next in turn, so that Shards calls visit
// every shard once.
func (m *Map[V]) Sweep(now int64) {
	sh := &m.shards[(m.next.Add(1)-1)%Shards]
	sh.Lock()
	for k, v := range sh.m {
		if sh.remaining(v, now) <= 0 {
			delete(sh.m, k)
		}
	}
	sh.Unlock()
}

// Lock locks the shard.
func (sh *Shard[V]) Lock() { sh.mu.Lock() }

// Unlock unlocks the shard.
func (sh *Shard[V]) Unlock() { sh.mu.Unlock() }

// Get returns key's value and whether it is present.
func (sh *Shard[V]) Get(key string) (V, bool) {
	v, ok := sh.m[key]
	return v, ok
}

// Set stores v under key, which the map keeps: the caller must own it (strings.Clone a key
// that points into a larger buffer). Call MakeRoom first for a key that is not present.
func (sh *Shard[V]) Set(key string, v V) { sh.m[key] = v }

// Range calls fn for every entry of the shard.
func (sh *Shard[V]) Range(fn func(key string, v V)) {
	for k, v := range sh.m {
		fn(k, v)
	}
}

// Delete drops key.
func (sh *Shard[V]) Delete(key string) { delete(sh.m, key) }

// MakeRoom makes room for one more entry: when the shard is full, it drops the first expired
// entry among Sample sampled, else the sampled one with the least time remaining. It reports
// false, dropping nothing, when the shard is full and every sampled entry is Pinned.
func (sh *Shard[V]) MakeRoom(now int64) bool {
	if len(sh.m) < sh.limit {
		return true
	}
	var victim string
	least, i := int64(Pinned), 0
	for k, v := range sh.m { // map iteration starts at a random place: a random sample
		r := sh.remaining(v, now)
		if r <= 0 {
			victim, least = k, r
			break
		}
		if r < least {
			victim, least = k, r
		}
		if i++; i == Sample {
			break
		}
	}
	if least == Pinned {
		return false
	}
	delete(sh.m, victim)
	return true
}

// Mark adds v to the shard's marked values, a work list the caller drains with Marked and
// ResetMarked (Async's keys to sync). The caller keeps a value from being marked twice.
func (sh *Shard[V]) Mark(v V) { sh.marked = append(sh.marked, v) }

// Marked returns the marked values, in the order they were marked. The slice is the shard's:
// it is valid until the shard is unlocked.
func (sh *Shard[V]) Marked() []V { return sh.marked }

// ResetMarked empties the marked values, keeping their storage.
func (sh *Shard[V]) ResetMarked() {
	clear(sh.marked)
	sh.marked = sh.marked[:0]
}
