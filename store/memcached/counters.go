package memcached

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// counted reports whether a is decided on window counters (incr) rather than by gets/cas.
func counted(a sluice.Algorithm) bool {
	return a == sluice.AlgorithmFixedWindow || a == sluice.AlgorithmSlidingWindow
}

// increments reports whether c takes units that may fit: such calls count first and undo
// what was denied. Peeks, refunds, costs above the limit and settles read the counters
// instead.
func increments(c *call) bool { return c.req.Kind().Takes() && c.req.N <= c.req.Rule.Limit }

// view is a counter rule's state as package algorithm holds it, built from the counters of
// the windows a decision reads, so the decision is algorithm's own.
type view struct {
	fixed   algorithm.FixedWindow
	sliding algorithm.SlidingWindow
	slide   bool
	first   int64 // index of the oldest window read
	n       int64
}

func newView(r sluice.Rule, cur int64) view {
	shape := algorithm.WindowShape(r)
	length, n := shape.Length, shape.Count
	v := view{slide: r.Algorithm == sluice.AlgorithmSlidingWindow, first: cur - n + 1, n: n}
	if v.slide {
		v.sliding = algorithm.SlidingWindow{Counts: make([]int64, n), Newest: cur, Sub: length}
	} else {
		v.fixed = algorithm.FixedWindow{End: (cur + 1) * length}
	}
	return v
}

// at returns the count of window j (first <= j <= first+n-1): sub-window j's counter sits at
// j mod (N+1) of the sliding window's ring.
func (v *view) at(j int64) *int64 {
	if !v.slide {
		return &v.fixed.Count
	}
	return &v.sliding.Counts[algorithm.RingIndex(j, v.n)]
}

// apply decides req on the view (algorithm.Apply), never a budget step (those go to the
// state item: see round), so never with an error.
func (v *view) apply(now int64, p *algorithm.Params, req *sluice.Request) sluice.Decision {
	var st algorithm.State = &v.fixed
	if v.slide {
		st = &v.sliding
	}
	d, _ := algorithm.Apply(st, now, p, req)
	return d
}

// countRound decides calls (all of one rule) on window counters. Calls that take units (see
// increments) add their total to the current window's counter with one incr (an add when it
// does not exist yet), are decided in order against the view with the counter as it was
// before, and the units of those denied are taken back with one decr. Any other call is alone:
// it reads the counters, and a refund decrements the windows algorithm took the units from
// (a settle's charge increments the one it counts in).
func (s *Store) countRound(sh *laneShard, key string, b base, calls []*call, now, latest int64) {
	rule, p := calls[0].req.Rule, calls[0].p
	shape := algorithm.WindowShape(rule)
	length, n := shape.Length, shape.Count
	cur := algorithm.WindowIndex(latest, length)
	vv := newView(rule, cur)
	v := &vv
	keys := func(count int64) []string { // the first count windows' counters
		k := make([]string, count)
		for j := range k {
			k[j] = b.window(length/1e6, v.first+int64(j))
		}
		return k
	}
	lasts := (cur + n) * length // when the current window stops counting
	s.stats.rounds.Add(1)
	fail := func(err error) {
		for _, c := range calls {
			c.err = err
		}
	}
	mk := memoKey{key, length}
	if !increments(calls[0]) {
		all := keys(n)
		if err := s.readCounts(all, v); err != nil {
			fail(err)
			return
		}
		before := make([]int64, n)
		for j := range before {
			before[j] = *v.at(v.first + int64(j))
		}
		c := calls[0]
		c.d = v.apply(now, p, &c.req)
		for j := range before {
			w := v.first + int64(j)
			var err error
			switch delta := *v.at(w) - before[j]; {
			case delta < 0:
				if _, err = s.client.Decrement(all[j], uint64(-delta)); errors.Is(err, memcache.ErrCacheMiss) {
					err = nil
				} else if err != nil {
					err = unavailable(err)
				}
			case delta > 0: // a settle's charge
				_, err = s.incr(all[j], delta, s.expiration((w+n)*length-now), false)
			}
			if err != nil {
				c.err = err
				return
			}
		}
		sh.remember(mk, cur, v, true, false) // as the decision left them
		return
	}
	older, exists := sh.recall(mk, cur, v)
	if n > 1 && !older {
		if err := s.readCounts(keys(n-1), v); err != nil {
			fail(err)
			return
		}
	}
	var sum int64
	for _, c := range calls {
		sum += c.req.N
	}
	curKey := b.window(length/1e6, cur)
	total, err := s.incr(curKey, sum, s.expiration(lasts-now), !exists)
	if err != nil {
		fail(err)
		return
	}
	sh.remember(mk, cur, v, n > 1 && !older, true)
	*v.at(cur) = total - sum
	var denied int64
	for _, c := range calls {
		c.d = v.apply(now, p, &c.req)
		if !c.d.Allowed {
			denied += c.req.N
		}
	}
	if denied > 0 {
		s.stats.overshoots.Add(1)
		s.stats.overshootUnits.Add(denied)
		// A failed decr leaves the units counted until the window expires: later requests
		// may be denied for them, never admitted.
		_, _ = s.client.Decrement(curKey, uint64(denied))
	}
}

// What a store remembers of a key's window counters between its decisions, so that most
// takes cost one round trip:
//
//   - The older sub-windows of a sliding window change little once they are past: only
//     refunds and late arrivals (a decision of another process whose clock is behind, or whose
//     round was in flight at the edge) still touch them. A store reads them once per key and
//     current sub-window (one get_multi) and keeps them until the current sub-window changes.
//     Counts it keeps may be higher than memcached's (after another process's refund: a
//     decision may deny what it could have admitted) or lower by the late arrivals of one
//     clock skew (see the package doc). A read of all the counters (a peek, a refund) renews
//     them.
//   - Whether the current window's counter exists: the first take of a window this store sees
//     for a key creates the counter with add (and increments it if another process was first),
//     later ones increment it (and create it if it expired or was evicted). So a key whose
//     window this store has not seen costs one round trip, not an incr that misses and an add.
type memoKey struct {
	key    string
	length int64
}

type memo struct {
	cur     int64   // the current window older was read in
	older   []int64 // windows cur-N .. cur-1, when len(older) == N
	counted int64   // the newest window whose counter this store has created or incremented
}

// maxMemos bounds the keys a lane shard remembers.
const maxMemos = 1024

// recall copies the older sub-windows remembered for k in window cur into v, reporting
// whether there were any, and whether the current window's counter is known to exist.
func (sh *laneShard) recall(k memoKey, cur int64, v *view) (older, exists bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	m := sh.memos[k]
	if m == nil {
		return false, false
	}
	exists = m.counted == cur
	if m.cur != cur || int64(len(m.older)) != v.n-1 {
		return false, exists
	}
	for j, c := range m.older {
		*v.at(v.first + int64(j)) = c
	}
	return true, exists
}

// remember keeps v's older sub-windows for k in window cur (when older is set) and that the
// current window's counter exists (when counted is set).
func (sh *laneShard) remember(k memoKey, cur int64, v *view, older, counted bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	m := sh.memos[k]
	if m == nil {
		if len(sh.memos) >= maxMemos {
			for old := range sh.memos { // any one
				delete(sh.memos, old)
				break
			}
		}
		m = &memo{cur: math.MinInt64, counted: math.MinInt64}
		sh.memos[k] = m
	}
	if counted {
		m.counted = cur
	}
	if older && v.n > 1 {
		m.cur = cur
		m.older = m.older[:0]
		for j := range v.n - 1 {
			m.older = append(m.older, *v.at(v.first + j))
		}
	}
}

// readCounts reads the counters of keys (windows v.first, v.first+1, ...) into v; a missing
// counter counts 0.
func (s *Store) readCounts(keys []string, v *view) error {
	switch len(keys) {
	case 0:
		return nil
	case 1:
		it, err := s.client.Get(keys[0])
		if errors.Is(err, memcache.ErrCacheMiss) {
			return nil
		}
		if err != nil {
			return unavailable(err)
		}
		*v.at(v.first) = parseCount(it.Value)
		return nil
	}
	items, err := s.client.GetMulti(keys)
	if err != nil {
		return unavailable(err)
	}
	for j, k := range keys {
		if it := items[k]; it != nil {
			*v.at(v.first + int64(j)) = parseCount(it.Value)
		}
	}
	return nil
}

// parseCount reads a counter's value (memcached pads a value that incr or decr shortened with
// spaces); anything else counts 0.
func parseCount(b []byte) int64 {
	x, err := strconv.ParseInt(strings.TrimRight(string(b), " "), 10, 64)
	if err != nil || x < 0 {
		return 0
	}
	return x
}

// incr adds delta to the counter at key, creating it with the given expiration when it does
// not exist, and returns its new total. fresh says the counter is probably new: add first.
func (s *Store) incr(key string, delta int64, exp int32, fresh bool) (int64, error) {
	for range 3 {
		if !fresh {
			total, err := s.client.Increment(key, uint64(delta))
			if err == nil {
				return int64(total), nil
			}
			if !errors.Is(err, memcache.ErrCacheMiss) {
				return 0, unavailable(err)
			}
		}
		fresh = false
		err := s.client.Add(&memcache.Item{Key: key, Value: strconv.AppendInt(nil, delta, 10), Expiration: exp})
		if err == nil {
			return delta, nil
		}
		if !errors.Is(err, memcache.ErrNotStored) {
			return 0, unavailable(err)
		}
		// created meanwhile by another process: increment it
	}
	return 0, unavailable(errors.New("counter " + key + " kept vanishing between incr and add"))
}
