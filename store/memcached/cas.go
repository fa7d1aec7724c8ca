package memcached

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// casRound decides calls (token bucket, leaky bucket, GCRA, sliding log) with an optimistic
// gets/cas loop around the algorithm's own state: read the state item (gets), decide every
// call in order on it exactly as the memory store would, and write it back if it changed
// (cas, or add when there was none). A write that loses to another writer is retried, after a
// jittered pause, from a fresh read, up to the retry budget; then every call fails with a
// *ContentionError.
func (s *Store) casRound(b base, calls []*call, now int64, deadline time.Time) {
	key := b.state()
	var buf []byte
	for attempt := 1; ; attempt++ {
		s.stats.rounds.Add(1)
		err := s.casAttempt(key, calls, now, buf[:0])
		if err == nil {
			return
		}
		if !errors.Is(err, errConflict) {
			for _, c := range calls {
				c.err = err
			}
			return
		}
		for _, c := range calls {
			c.err = nil // the next attempt decides them again
		}
		s.stats.conflicts.Add(1)
		pause := s.backoff(attempt)
		if attempt >= s.cfg.maxAttempts || time.Now().Add(pause).After(deadline) {
			s.stats.contention.Add(int64(len(calls)))
			for _, c := range calls {
				c.err = &ContentionError{Key: calls[0].req.Key, Attempts: attempt}
			}
			return
		}
		time.Sleep(pause)
	}
}

// errConflict is a lost gets/cas round.
var errConflict = errors.New("memcached: cas conflict")

// casAttempt is one gets/cas attempt: nil when the calls are decided (and the state written if
// it changed), errConflict when another writer got there first.
func (s *Store) casAttempt(key string, calls []*call, now int64, buf []byte) error {
	it, err := s.client.Get(key)
	var st algorithm.State
	switch {
	case err == nil:
		st, _ = algorithm.DecodeState(it.Value) // not a state of ours: start from full
	case errors.Is(err, memcache.ErrCacheMiss):
		it = nil
	default:
		return unavailable(err)
	}
	var last sluice.Decision
	decided := false
	for _, c := range calls {
		if st == nil || st.Algorithm() != c.req.Rule.Algorithm {
			st = algorithm.New(c.req.Rule.Algorithm) // a new algorithm starts from full
		}
		if c.req.Kind().Budget() {
			st = algorithm.WithLedger(st)
		}
		c.d, c.err = algorithm.Apply(st, now, c.p, &c.req) // an error: a budget step that moved nothing
		if c.err == nil {
			last, decided = c.d, true
		}
	}
	if !decided { // every call was a budget step refused: the state's own reset, from a peek on a copy
		if cp, err := algorithm.DecodeState(algorithm.AppendState(nil, st)); err == nil {
			last = cp.Take(now, calls[len(calls)-1].p, 0, 0)
		}
	}
	need := int64(last.ResetAfter) // the state matters that long, and its open reservations until they expire
	if l, ok := st.(*algorithm.Ledger); ok {
		need = max(need, l.Expiry()-now)
	}
	enc := algorithm.AppendState(buf, st)
	exp := s.expiration(need)
	switch {
	case it == nil && need <= 0:
		return nil // a full state: nothing to keep
	case it != nil && bytes.Equal(enc, it.Value):
		return nil
	}
	return s.write(it, key, enc, exp)
}

// write ends a gets/cas round: it stores value under key, with add when the round read no
// item (old nil), else with cas on old; errConflict when another writer got there first.
func (s *Store) write(old *memcache.Item, key string, value []byte, exp int32) error {
	var err error
	if old == nil {
		err = s.client.Add(&memcache.Item{Key: key, Value: value, Expiration: exp})
	} else {
		err = s.client.CompareAndSwap(&memcache.Item{Key: key, Value: value, Expiration: exp, CasID: old.CasID})
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, memcache.ErrCASConflict), errors.Is(err, memcache.ErrNotStored), errors.Is(err, memcache.ErrCacheMiss):
		return errConflict
	}
	return unavailable(err)
}

// backoff is the pause after the attempt-th conflict: uniform in [0, base x 2^(attempt-1)),
// capped at 32 x base.
func (s *Store) backoff(attempt int) time.Duration {
	ceil := s.cfg.backoff << min(attempt-1, 5)
	if ceil <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceil)))
}
