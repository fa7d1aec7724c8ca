package memory

import (
	"fmt"
	"math/rand/v2"

	"github.com/sluicehq/sluice"
)

// Eviction: past WithMaxKeys or WithMaxBytes a new key makes room by forgetting keys, and a
// forgotten key starts again from full, so forgetting one gives its next requests back the
// units it had used. The store forgets only what costs little, and never what would readmit
// a key over its limit:
//
//   - a key back to full (its expiry passed) costs nothing: it is taken at once;
//   - a key decided more than once keeps its state until it is back to full: a key in use (a
//     hot key) is never reset by a flood of others;
//   - a key that a request of one unit would find denied (at its limit, over a lowered limit,
//     or in debt after a settle) is never forgotten;
//   - a key decided once that still admits may be forgotten: it gives back that one request's
//     units. Among those, the one that has used the fewest units, then the one idle longest,
//     then the one back to full soonest.
//
// The candidates are a sample: up to evictionSamples keys from the new key's shard and as many
// from other shards (makeRoom). When no key sampled may be forgotten, the new key is refused
// with ErrFull, which wraps sluice.ErrStoreUnavailable, so the caller's failure policy decides
// (fail open, fail closed, a fallback): memory stays bounded and no key admits past its limit
// because of a flood. A key decided once and forgotten, decided once again and forgotten
// again, gives back one request each time; once two of its decisions meet in the store it is
// kept.

// ErrFull reports a new key refused because the store is at WithMaxKeys or WithMaxBytes and no
// key sampled to make room for it may be forgotten: each was decided more than once and is not
// back to full, or is over its limit or in debt. It wraps sluice.ErrStoreUnavailable (no
// decision was made), so failure policies apply to it as to an unreachable store.
var ErrFull = fmt.Errorf("memory: full: no key sampled to make room for a new key may be forgotten without readmitting it (WithMaxKeys, WithMaxBytes): %w", sluice.ErrStoreUnavailable)

// entry.seen is the stamp of an entry's first decision: its time in ticks of 2^26 ns (67 ms,
// in bits 1-15: they wrap after 36 minutes, and an entry idle for longer may look recent
// again, which only spares it once more), and in bit 0 whether the entry was decided again
// since (returned). Only an entry decided once is ever priced by its age, so later decisions
// set the bit and leave the time: a load and a predicted branch on the hot path, no store.
const (
	stampShift = 25
	returned   = 1
)

// first is the stamp of an entry's first decision, at now.
func first(now int64) uint16 { return uint16(now>>stampShift) &^ returned }

// markReturned marks e decided again; e.mu is held.
func (e *entry) markReturned() {
	if e.seen&returned == 0 {
		e.seen |= returned
	}
}

// cost is what forgetting one entry gives away: nothing when it is back to full; else the
// fewer units, the cheaper; at equal units, the longer idle (age, in stamp ticks), then the
// sooner back to full (expires).
type cost struct {
	full    bool
	units   int64
	age     uint16
	expires int64
}

// negligible reports whether forgetting costs so little that no other candidate need be
// sampled: the entry is back to full, or it used at most one unit and has not been decided
// for two ticks (134 ms or more): a key in use, such as a hot key between its first requests,
// is never taken on sight.
func (c cost) negligible() bool { return c.full || c.units <= 1 && c.age >= 2 }

func (c cost) less(o cost) bool {
	switch {
	case c.full != o.full:
		return c.full
	case c.units != o.units:
		return c.units < o.units
	case c.age != o.age:
		return c.age > o.age
	}
	return c.expires < o.expires
}

// price returns the cost of forgetting e, or ok false when e must not be forgotten: it was
// decided more than once and is not back to full, it holds open budget reservations (their
// units would be given back), or a request of one unit would be denied.
// now is the store's time (Store.now); e is priced on the clock its decisions read (nowFor),
// the coarse one for a rule that tolerates it, and its state peeked at. e.mu is held.
func (s *Store) price(e *entry, now int64) (c cost, ok bool) {
	if e.coarse {
		now = coarseNow()
	}
	c.expires, c.age = e.until(), (first(now)-e.seen&^returned)>>1
	if c.full = c.expires <= now; c.full {
		return c, true
	}
	if e.seen&returned != 0 || c.expires > e.expires {
		return c, false // decided again, or holding open budget reservations
	}
	d := e.state.Take(now, e.params, 0, 0)
	if !d.Allowed || d.Remaining <= 0 {
		return c, false
	}
	c.units = max(0, e.params.Rule.Capacity()-d.Remaining)
	return c, true
}

// victim samples up to evictionSamples live entries of sh from a random place and returns the
// cheapest to forget with its cost, stopping at a negligible one; nil when none may be
// forgotten. sampled counts the entries seen. sh.mu is held.
func (s *Store) victim(sh *shard) (v *slot, c cost, sampled int) {
	t, now := sh.tab.Load(), s.now()
	for i, k := rand.Uint64()&t.mask, 0; k < len(t.slots) && sampled < evictionSamples; i, k = (i+1)&t.mask, k+1 {
		sl := &t.slots[i]
		e := sl.e.Load()
		if e == nil {
			continue
		}
		sampled++
		e.mu.Lock()
		ec, ok := s.price(e, now)
		e.mu.Unlock()
		if ok && (v == nil || ec.less(c)) {
			v, c = sl, ec
		}
		if ok && ec.negligible() {
			break
		}
	}
	return v, c, sampled
}

// evictFrom forgets the cheapest sampled entry of sh to bring it under the key count; sh.mu is
// held. It reports false when sh has entries but none may be forgotten.
func (s *Store) evictFrom(sh *shard) bool {
	v, c, sampled := s.victim(sh)
	if v == nil {
		return sampled == 0
	}
	sh.remove(v, &s.bytes)
	if !c.full {
		s.evictions.Add(1)
	}
	return true
}

// makeRoom evicts entries until the store's charges plus need fit in WithMaxBytes; sh.mu is
// held. Each victim is the cheapest to forget among the samples of sh and of a few random
// other shards whose lock is free (TryLock: two inserts never wait on each other's shard), so a
// key alone in its shard, such as a hot one, is not evicted for lack of other candidates. It
// reports false when keys were sampled and none may be forgotten (the caller refuses the new
// key); when no shard offers a key at all, it reports true and the store stays over the budget
// until the next insert.
func (s *Store) makeRoom(sh *shard, need int64) bool {
	for s.bytes.Load()+need > s.maxBytes {
		v, c, sampled := s.victim(sh)
		if v != nil && c.negligible() { // no other shard need be sampled
			sh.remove(v, &s.bytes)
			if !c.full {
				s.evictions.Add(1)
			}
			continue
		}
		from := sh
		// consider takes o's victim when it is cheaper than the one held, keeping o locked
		// while it holds it; it reports whether o had keys to sample.
		consider := func(o *shard) bool {
			if o == sh || o == from || !o.mu.TryLock() {
				return false
			}
			ov, oc, n := s.victim(o)
			sampled += n
			if ov == nil || (v != nil && !oc.less(c)) {
				o.mu.Unlock()
				return n > 0
			}
			if from != sh {
				from.mu.Unlock()
			}
			v, c, from = ov, oc, o
			return true
		}
		probed := 0
		for tried := 0; probed < evictionSamples && tried < 4*evictionSamples && len(s.shards) > 1; tried++ {
			if consider(&s.shards[rand.Uint64()&s.mask]) {
				probed++
			}
		}
		// Sparse shards (more shards than keys): the random probes may find one other key or
		// none, and that one may be a hot key alone in its shard while every other key is
		// cheaper (it was evicted in ~1% of the floods of TestByteBudgetFlood with 1,024
		// shards). A thin sample goes on through the shards in order until it has
		// evictionSamples keys to choose from.
		for i := 0; probed < evictionSamples && i < len(s.shards); i++ {
			if consider(&s.shards[i]) {
				probed++
			}
		}
		if v == nil {
			return sampled == 0
		}
		from.remove(v, &s.bytes)
		if from != sh {
			from.mu.Unlock()
		}
		if !c.full {
			s.evictions.Add(1)
		}
	}
	return true
}
