package memory

import (
	"context"
	"sync"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

var (
	_ sluice.Leaser       = (*Store)(nil)
	_ sluice.LeaseClearer = (*Store)(nil)
)

// leaseShards is the number of locks the leases are spread over.
const leaseShards = 64

// leaseTable holds the leases of the concurrency limits (sluice.Leaser), apart from the rate
// state. Its zero value is ready to use.
type leaseTable struct {
	shards [leaseShards]leaseShard
}

type leaseShard struct {
	mu        sync.Mutex
	sets      map[string]*leaseSet
	cleanedAt int // len(sets) after the last cleanup
}

// leaseSet is one key's leases: ids and expiries (Unix ns), in no order. It is kept while
// empty, so acquiring and releasing on a key allocates nothing, until a sweep or cleanup.
type leaseSet struct {
	ids     []sluice.LeaseID
	expires []int64
}

// live drops the leases expired at now and returns how many remain and the soonest expiry.
func (ls *leaseSet) live(now int64) (n int, soonest int64) {
	for i := 0; i < len(ls.ids); {
		if ls.expires[i] <= now {
			ls.remove(i)
			continue
		}
		if n == 0 || ls.expires[i] < soonest {
			soonest = ls.expires[i]
		}
		n++
		i++
	}
	return n, soonest
}

func (ls *leaseSet) remove(i int) {
	last := len(ls.ids) - 1
	ls.ids[i], ls.expires[i] = ls.ids[last], ls.expires[last]
	ls.ids, ls.expires = ls.ids[:last], ls.expires[:last]
}

func (ls *leaseSet) find(id sluice.LeaseID) int {
	for i := range ls.ids {
		if ls.ids[i] == id {
			return i
		}
	}
	return -1
}

// leaseNow reads the clock for leases: the coarse clock when allowed (WithCoarseClock), as a
// lease lasts at least sluice.MinLease, 20 of its 500 µs ticks; else the store's clock.
func (s *Store) leaseNow() int64 {
	if s.clock == nil && s.coarse {
		return coarseNow()
	}
	return s.now()
}

func (s *Store) leaseShard(key string) *leaseShard {
	return &s.leases.shards[s.hash(key)%leaseShards]
}

// AcquireLease implements sluice.Leaser: it decides with algorithm.DecideLease under the
// key's lock. Acquiring and releasing on a key that was used before allocates nothing.
func (s *Store) AcquireLease(_ context.Context, req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	if err := req.Validate(s.maxKeyLen); err != nil {
		return sluice.LeaseDecision{}, err
	}
	now := s.leaseNow()
	sh := s.leaseShard(req.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	set := sh.sets[req.Key]
	if set == nil {
		set = sh.newSet(req.Key, now)
	}
	n, soonest := set.live(now)
	d := algorithm.DecideLease(req.InFlight.Limit, req.Holdback, int64(n), soonest, now)
	if d.Admitted {
		set.ids = append(set.ids, req.ID)
		set.expires = append(set.expires, now+int64(req.InFlight.LeaseTime()))
	}
	return d, nil
}

// newSet adds an empty set for key, first dropping the shard's sets with no live lease once
// the shard has doubled since the last cleanup.
func (sh *leaseShard) newSet(key string, now int64) *leaseSet {
	if sh.sets == nil {
		sh.sets = make(map[string]*leaseSet)
	}
	if len(sh.sets) >= 2*max(sh.cleanedAt, 64) {
		sh.dropIdle(now)
	}
	set := &leaseSet{}
	sh.sets[key] = set
	return set
}

func (sh *leaseShard) dropIdle(now int64) {
	for k, set := range sh.sets {
		if n, _ := set.live(now); n == 0 {
			delete(sh.sets, k)
		}
	}
	sh.cleanedAt = len(sh.sets)
}

// RenewLeases implements sluice.Leaser: each live lease expires its Lease from now; an
// expired or released one is reported not held.
func (s *Store) RenewLeases(_ context.Context, batch []sluice.LeaseRenewal) error {
	now := s.leaseNow()
	for i := range batch {
		r := &batch[i]
		r.Held, r.Err = false, nil
		if err := r.Validate(s.maxKeyLen); err != nil {
			r.Err = err
			continue
		}
		sh := s.leaseShard(r.Key)
		sh.mu.Lock()
		if set := sh.sets[r.Key]; set != nil {
			set.live(now)
			if j := set.find(r.ID); j >= 0 {
				set.expires[j] = now + int64(r.Lease)
				r.Held = true
			}
		}
		sh.mu.Unlock()
	}
	return nil
}

// ReleaseLease implements sluice.Leaser: it removes the lease if the key holds it.
func (s *Store) ReleaseLease(_ context.Context, key string, id sluice.LeaseID) error {
	sh := s.leaseShard(key)
	sh.mu.Lock()
	if set := sh.sets[key]; set != nil {
		if j := set.find(id); j >= 0 {
			set.remove(j)
		}
	}
	sh.mu.Unlock()
	return nil
}

// ClearLeases implements sluice.LeaseClearer: it drops every lease of key.
func (s *Store) ClearLeases(_ context.Context, key string) (int64, error) {
	now := s.leaseNow()
	sh := s.leaseShard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	set := sh.sets[key]
	if set == nil {
		return 0, nil
	}
	n, _ := set.live(now)
	set.ids, set.expires = set.ids[:0], set.expires[:0]
	return int64(n), nil
}

// InFlight reports how many live leases key holds.
func (s *Store) InFlight(key string) int {
	now := s.leaseNow()
	sh := s.leaseShard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if set := sh.sets[key]; set != nil {
		n, _ := set.live(now)
		return n
	}
	return 0
}

// sweepLeases drops the sets with no live lease.
func (s *Store) sweepLeases(now int64) {
	for i := range s.leases.shards {
		sh := &s.leases.shards[i]
		sh.mu.Lock()
		sh.dropIdle(now)
		sh.mu.Unlock()
	}
}
