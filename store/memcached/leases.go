package memcached

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

var (
	_ sluice.Leaser       = (*Store)(nil)
	_ sluice.LeaseClearer = (*Store)(nil)
)

// The leases of a key live in one item, "<prefix><body>|l", holding each lease's id (16 bytes)
// and expiry (a varint, Unix ns on the store's clock), changed by the same gets/cas loop as the
// CAS algorithms: one gets and one cas (or add) per acquire, release or renewal of a key when
// no other writer interferes. The item expires with its last lease.

// leaseItem is the item holding key's leases.
func (s *Store) leaseItem(key string) string { return s.cfg.prefix + body(s.cfg.prefix, key) + "|l" }

// leaseList is a key's leases, decoded.
type leaseList struct {
	ids []sluice.LeaseID
	exp []int64
}

// decodeLeases reads an item's value, dropping the leases expired at now. A value that is not
// ours reads as no lease.
func decodeLeases(b []byte, now int64) (l leaseList, dropped bool) {
	for len(b) > 0 {
		if len(b) < len(sluice.LeaseID{}) {
			return leaseList{}, true
		}
		var id sluice.LeaseID
		copy(id[:], b)
		exp, k := binary.Varint(b[len(id):])
		if k <= 0 {
			return leaseList{}, true
		}
		b = b[len(id)+k:]
		if exp <= now {
			dropped = true
			continue
		}
		l.ids, l.exp = append(l.ids, id), append(l.exp, exp)
	}
	return l, dropped
}

func (l *leaseList) encode() (b []byte, last int64) {
	for i, id := range l.ids {
		b = append(b, id[:]...)
		b = binary.AppendVarint(b, l.exp[i])
		last = max(last, l.exp[i])
	}
	return b, last
}

func (l *leaseList) find(id sluice.LeaseID) int {
	for i := range l.ids {
		if l.ids[i] == id {
			return i
		}
	}
	return -1
}

// updateLeases runs one gets/cas loop on key's lease item: change gets the live leases at now
// and reports whether to write them back. This process's rounds on a key take turns (a lock
// per shard of keys), so its own callers never make each other retry; only other processes'
// writes do.
//
// It returns by ctx's end: waiting for its turn and making its round (whose gomemcache calls
// take no context) both end with the context, with an error wrapping ErrStoreUnavailable. A
// round abandoned so goes on in the background, bounded by the store's timeout, and may still
// write: change must keep what it finds to itself, for the caller to read only on success.
func (s *Store) updateLeases(ctx context.Context, key string, change func(l *leaseList, now int64) bool) error {
	if s.closed.Load() {
		return fmt.Errorf("memcached: leases: %w", sluice.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return unavailable(err)
	}
	turn := s.leases[maphash.String(s.seed, key)%laneShards]
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return unavailable(ctx.Err())
	}
	if ctx.Done() == nil { // a context that never ends: no need to wait apart
		defer func() { <-turn }()
		return s.leaseRound(key, change)
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-turn }()
		done <- s.leaseRound(key, change)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return unavailable(ctx.Err())
	}
}

// leaseRound is updateLeases's gets/cas loop, its turn taken.
func (s *Store) leaseRound(key string, change func(l *leaseList, now int64) bool) error {
	item := s.leaseItem(key)
	return s.casLoop(key, func() error {
		it, err := s.client.Get(item)
		switch {
		case errors.Is(err, memcache.ErrCacheMiss):
			it = nil
		case err != nil:
			return unavailable(err)
		}
		now := s.clock.Now().UnixNano()
		var l leaseList
		dropped := false
		if it != nil {
			l, dropped = decodeLeases(it.Value, now)
		}
		if !change(&l, now) && !dropped {
			return nil
		}
		if it == nil && len(l.ids) == 0 {
			return nil
		}
		val, last := l.encode()
		return s.write(it, item, val, s.expiration(last-now))
	})
}

// AcquireLease implements sluice.Leaser: it decides with algorithm.DecideLease in one gets/cas
// round on the key's lease item. An item holds about 40,000 leases at most (26 bytes each in
// memcached's default 1 MB item); a limit above what fits fails the acquire once the item is
// full.
func (s *Store) AcquireLease(ctx context.Context, req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	if err := req.Validate(s.cfg.maxKeyLen); err != nil {
		return sluice.LeaseDecision{}, err
	}
	d := new(sluice.LeaseDecision) // the round's own: an abandoned round may still write it
	err := s.updateLeases(ctx, req.Key, func(l *leaseList, now int64) bool {
		soonest := int64(0)
		for i, e := range l.exp {
			if i == 0 || e < soonest {
				soonest = e
			}
		}
		*d = algorithm.DecideLease(req.InFlight.Limit, req.Holdback, int64(len(l.ids)), soonest, now)
		if d.Admitted {
			l.ids, l.exp = append(l.ids, req.ID), append(l.exp, now+int64(req.InFlight.LeaseTime()))
		}
		return d.Admitted
	})
	if err != nil {
		return sluice.LeaseDecision{}, err
	}
	return *d, nil
}

// ReleaseLease implements sluice.Leaser: it removes the lease from the key's item, if there.
func (s *Store) ReleaseLease(ctx context.Context, key string, id sluice.LeaseID) error {
	return s.updateLeases(ctx, key, func(l *leaseList, _ int64) bool {
		i := l.find(id)
		if i < 0 {
			return false
		}
		l.ids, l.exp = append(l.ids[:i], l.ids[i+1:]...), append(l.exp[:i], l.exp[i+1:]...)
		return true
	})
}

// ClearLeases implements sluice.LeaseClearer: it empties the key's item in one gets/cas
// round.
func (s *Store) ClearLeases(ctx context.Context, key string) (int64, error) {
	n := new(int64) // the round's own: an abandoned round may still write it
	err := s.updateLeases(ctx, key, func(l *leaseList, _ int64) bool {
		*n = int64(len(l.ids))
		l.ids, l.exp = nil, nil
		return *n > 0
	})
	if err != nil {
		return 0, err
	}
	return *n, nil
}

// RenewLeases implements sluice.Leaser: one gets/cas round per key of the batch (memcached has
// no multi-key atomic update), the keys' rounds one after another. A key whose round fails
// fails its items (Err); a closed store or a done context fails the call.
func (s *Store) RenewLeases(ctx context.Context, batch []sluice.LeaseRenewal) error {
	if s.closed.Load() {
		return fmt.Errorf("memcached: renew leases: %w", sluice.ErrClosed)
	}
	done := make([]bool, len(batch))
	for i := range batch {
		r := &batch[i]
		r.Held = false
		if r.Err = r.Validate(s.cfg.maxKeyLen); r.Err != nil {
			done[i] = true
		}
	}
	for i := range batch {
		if done[i] {
			continue
		}
		// The key's items, copied: an abandoned round (the context ended) must not touch the
		// caller's batch.
		key := batch[i].Key
		var items []renewal
		for j := i; j < len(batch); j++ {
			if r := &batch[j]; !done[j] && r.Key == key {
				items = append(items, renewal{at: j, id: r.ID, lease: r.Lease})
				done[j] = true
			}
		}
		held := make([]bool, len(items))
		err := s.updateLeases(ctx, key, func(l *leaseList, now int64) bool {
			changed := false
			for k, it := range items {
				x := l.find(it.id)
				held[k] = x >= 0
				if held[k] {
					l.exp[x] = now + int64(it.lease)
					changed = true
				}
			}
			return changed
		})
		for k, it := range items {
			if err != nil {
				batch[it.at].Held, batch[it.at].Err = false, err
			} else {
				batch[it.at].Held = held[k]
			}
		}
		if err := ctx.Err(); err != nil {
			return unavailable(err)
		}
	}
	return nil
}

// renewal is one item of a renewal batch, as a key's round reads it.
type renewal struct {
	at    int // its index in the batch
	id    sluice.LeaseID
	lease time.Duration
}

// casLoop runs attempt until it does not lose to another writer (errConflict), pausing with
// a jittered backoff between attempts, up to the retry budget and the store's timeout; then it
// fails with a *ContentionError on key.
func (s *Store) casLoop(key string, attempt func() error) error {
	deadline := time.Now().Add(s.cfg.timeout)
	for n := 1; ; n++ {
		err := attempt()
		if !errors.Is(err, errConflict) {
			return err
		}
		s.stats.conflicts.Add(1)
		pause := s.backoff(n)
		if n >= s.cfg.maxAttempts || time.Now().Add(pause).After(deadline) {
			return &ContentionError{Key: key, Attempts: n}
		}
		time.Sleep(pause)
	}
}
