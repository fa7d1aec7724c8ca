package distributed

import (
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// keyState is one key's local view in Async: a ring of window counters, each the last synced
// global total plus what this process added since. The decision math mirrors
// algorithm.FixedWindow and algorithm.SlidingWindow exactly (a single process that syncs
// after every decision decides exactly as the memory store does; async_test checks it).
type keyState struct {
	key      string
	rule     sluice.Rule
	sliding  bool
	length   int64 // window length, ns
	recentN  int64 // windows counted in full: 1 (fixed) or SubWindows (sliding)
	slots    []slot
	cur      int64 // newest window index decided in
	dirty    bool
	lastUsed int64 // Unix ns of the last decision
	orphans  []orphan
	// carried is the estimate carried over a rule change of shape (fixed windows: until
	// carriedEnd, the end of the window it was counted in); sliding windows carry it in the
	// current slot's carried field instead. It is this process's view of units counted
	// under the old shape, never synced: every process carries its own view of the same
	// global counters.
	carried, carriedEnd int64
}

// slot is one window's counter. The view of window idx is global + inflight + pending.
type slot struct {
	idx      int64
	global   int64 // total at the last sync, this process's synced units included
	inflight int64 // sent in the sync (or write) now in flight
	pending  int64 // not sent yet
	carried  int64 // estimate carried over a rule change (sliding windows), never synced
}

// orphan is a pending delta of a window that left the ring before it was synced.
type orphan struct {
	length time.Duration
	idx    int64
	delta  int64
}

func newKeyState(key string, r sluice.Rule) *keyState {
	ks := &keyState{key: key}
	ks.reset(r)
	return ks
}

// reshape shapes the state for rule r at now, carrying the current estimate over as
// algorithm.SlidingWindow.reshape does: a sliding window carries its estimate (the weighted
// oldest window rounded up) into the new current sub-window; a fixed window carries its
// current window's count until that window's end (algorithm.FixedWindow keeps counting in the
// current window until it ends). Unsynced deltas are kept as orphans.
func (ks *keyState) reshape(r sluice.Rule, now int64) {
	if ks.cur != math.MinInt64 && ks.length == shapeLength(r) {
		ks.rering(r)
		return
	}
	var carried, carriedEnd int64
	if ks.cur != math.MinInt64 {
		w := max(ks.cur, floorDiv(now, ks.length))
		if ks.sliding {
			if w > ks.cur {
				ks.cur = w
			} else {
				now = max(now, ks.cur*ks.length)
			}
			recent, old, f := ks.estimate(now)
			carried = algorithm.SlidingEstimate(recent, old, f, ks.length)
		} else if w == ks.cur {
			carried, carriedEnd = ks.val(ks.cur)+ks.carriedAt(now), (ks.cur+1)*ks.length
		}
	}
	ks.reset(r)
	if carried <= 0 {
		return
	}
	if ks.sliding {
		ks.cur = floorDiv(now, ks.length)
		ks.slotFor(ks.cur).carried = carried
	} else {
		ks.carried, ks.carriedEnd = carried, carriedEnd
	}
}

// shapeLength is the length of the windows rule r counts in.
func shapeLength(r sluice.Rule) int64 {
	if r.Algorithm == sluice.AlgorithmSlidingWindow {
		return int64(r.Period) / r.Windows()
	}
	return int64(r.Period)
}

// rering reshapes the state for a rule whose windows have the same length (only the number
// of sub-windows, or fixed vs sliding, changed): the windows are the same ones, so their
// counters are kept as they are (those that fit the new ring), which is more exact than a
// carried estimate and keeps matching the store's counters of those windows.
func (ks *keyState) rering(r sluice.Rule) {
	old, cur := ks.slots, ks.cur
	carried, carriedEnd := ks.carried, ks.carriedEnd
	ks.slots = nil
	ks.reset(r)
	ks.carried, ks.carriedEnd = carried, carriedEnd
	ks.cur = cur
	for _, s := range old {
		if s.idx == math.MinInt64 {
			continue
		}
		if s.idx <= cur-int64(len(ks.slots)) || ks.at(s.idx).idx > s.idx {
			if s.pending != 0 { // left the ring: keep its delta for the next sync
				ks.orphans = append(ks.orphans, orphan{time.Duration(ks.length), s.idx, s.pending})
			}
			continue
		}
		*ks.at(s.idx) = s
	}
}

// carriedAt is a fixed window's carried count still in force at now.
func (ks *keyState) carriedAt(now int64) int64 {
	if now < ks.carriedEnd {
		return ks.carried
	}
	return 0
}

// reset shapes the state for rule r with empty counters, keeping unsynced deltas as orphans.
func (ks *keyState) reset(r sluice.Rule) {
	ks.carried, ks.carriedEnd = 0, 0
	for i := range ks.slots {
		s := &ks.slots[i]
		if s.pending != 0 {
			ks.orphans = append(ks.orphans, orphan{time.Duration(ks.length), s.idx, s.pending})
		}
	}
	ks.rule = r
	ks.sliding = r.Algorithm == sluice.AlgorithmSlidingWindow
	if ks.sliding {
		ks.recentN = r.Windows()
		ks.length = int64(r.Period) / ks.recentN
		ks.slots = make([]slot, ks.recentN+1)
	} else {
		ks.recentN = 1
		ks.length = int64(r.Period)
		ks.slots = make([]slot, 1)
	}
	ks.cur = math.MinInt64
	for i := range ks.slots {
		ks.slots[i].idx = math.MinInt64
	}
}

// sameShape reports whether r counts in the same windows as the state.
func (ks *keyState) sameShape(r sluice.Rule) bool {
	if r.Algorithm != ks.rule.Algorithm {
		return false
	}
	return r.Period == ks.rule.Period && r.Windows() == ks.rule.Windows()
}

func (ks *keyState) at(j int64) *slot {
	n := int64(len(ks.slots))
	i := j % n
	if i < 0 {
		i += n
	}
	return &ks.slots[i]
}

// val is the view of window j (0 when the ring holds no counter for it).
func (ks *keyState) val(j int64) int64 {
	s := ks.at(j)
	if s.idx != j {
		return 0
	}
	return max(0, s.global+s.inflight+s.pending+s.carried)
}

// slotFor returns window j's slot, recycling an older window's slot (its unsynced delta
// becomes an orphan), or nil when the slot holds a newer window.
func (ks *keyState) slotFor(j int64) *slot {
	s := ks.at(j)
	if s.idx == j {
		return s
	}
	if s.idx > j {
		return nil
	}
	if s.pending != 0 {
		ks.orphans = append(ks.orphans, orphan{time.Duration(ks.length), s.idx, s.pending})
	}
	*s = slot{idx: j}
	return s
}

// first is the oldest window index the view reads.
func (ks *keyState) first() int64 { return ks.cur - int64(len(ks.slots)) + 1 }

// decide decides n units at now under r (which has the state's shape) and adds what it
// counts (or refunds) to the pending deltas.
func (ks *keyState) decide(now int64, r sluice.Rule, n int64) sluice.Decision {
	ks.rule = r // same shape; a new limit applies at once
	w := floorDiv(now, ks.length)
	if w < ks.cur { // the clock went backwards: stay in the newest window
		w = ks.cur
		if ks.sliding {
			now = ks.cur * ks.length
		}
	}
	ks.cur = w
	ks.lastUsed = now
	if ks.sliding {
		return ks.decideSliding(now, r.Limit, n)
	}
	return ks.decideFixed(now, r.Limit, n)
}

func (ks *keyState) decideFixed(now, limit, n int64) sluice.Decision {
	end := (ks.cur + 1) * ks.length
	own := ks.val(ks.cur)
	carried := ks.carriedAt(now)
	count := own + carried
	d := sluice.Decision{Limit: limit}
	switch {
	case n > limit:
		d.RetryAfter = sluice.Never
	case n < 0:
		n = max(n, -count)
		fromCarried := max(n, -carried) // refund the carried units first
		ks.carried += fromCarried
		if rest := n - fromCarried; rest != 0 {
			ks.slotFor(ks.cur).pending += rest
		}
		count += n
		d.Allowed = true
	case count+n <= limit:
		if n != 0 {
			ks.slotFor(ks.cur).pending += n
		}
		count += n
		d.Allowed = true
	case own+n <= limit && ks.carriedEnd < end:
		d.RetryAfter = time.Duration(ks.carriedEnd - now) // the carried units leave first
	default:
		d.RetryAfter = time.Duration(end - now)
	}
	d.Remaining = max(0, limit-count)
	if count != 0 {
		d.ResetAfter = time.Duration(end - now)
		if count == ks.carriedAt(now) {
			d.ResetAfter = time.Duration(min(end, ks.carriedEnd) - now)
		}
	}
	return d
}

func (ks *keyState) estimate(now int64) (recent, old, f int64) {
	for j := ks.cur - ks.recentN + 1; j <= ks.cur; j++ {
		recent += ks.val(j)
	}
	return recent, ks.val(ks.cur - ks.recentN), now - ks.cur*ks.length
}

func (ks *keyState) decideSliding(now, limit, n int64) sluice.Decision {
	sub := ks.length
	recent, old, f := ks.estimate(now)
	used := algorithm.SlidingEstimate(recent, old, f, sub)
	d := sluice.Decision{Limit: limit}
	switch {
	case n > limit:
		d.RetryAfter = sluice.Never
	case n < 0:
		rem := -n // newest windows first, as algorithm.SlidingWindow.refund
		for j := ks.cur; j > ks.cur-int64(len(ks.slots)) && rem > 0; j-- {
			if take := min(ks.val(j), rem); take > 0 {
				s := ks.slotFor(j)
				fromCarried := min(s.carried, take)
				s.carried -= fromCarried
				s.pending -= take - fromCarried
				rem -= take
			}
		}
		d.Allowed = true
		recent, old, f = ks.estimate(now)
		used = algorithm.SlidingEstimate(recent, old, f, sub)
	case used+n <= limit:
		if n != 0 {
			ks.slotFor(ks.cur).pending += n
		}
		used += n
		d.Allowed = true
	default:
		d.RetryAfter = time.Duration(ks.retryAfter(now, limit-n, recent, old, f))
	}
	d.Remaining = max(0, limit-used)
	d.ResetAfter = time.Duration(ks.resetAfter(now))
	return d
}

// retryAfter is algorithm.SlidingRetryAfter over the view.
func (ks *keyState) retryAfter(now, need, recent, old, f0 int64) int64 {
	return algorithm.SlidingRetryAfter(now, need, recent, old, f0, ks.recentN, ks.length, ks.cur, ks.val)
}

// resetAfter is how long until every counted unit has slid out of the window.
func (ks *keyState) resetAfter(now int64) int64 {
	n := ks.recentN
	for j := ks.cur; j >= ks.cur-n; j-- {
		if ks.val(j) != 0 {
			return (j+n+1)*ks.length - now
		}
	}
	return 0
}

// idle reports whether the state has nothing to sync and no counter still in its window.
func (ks *keyState) idle(now int64) bool {
	if ks.dirty || len(ks.orphans) > 0 {
		return false
	}
	for i := range ks.slots {
		if s := &ks.slots[i]; s.pending != 0 || s.inflight != 0 {
			return false
		}
	}
	return now >= (ks.cur+int64(len(ks.slots))+1)*ks.length
}

// floorDiv returns floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
