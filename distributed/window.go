package distributed

import (
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// keyState is one key's local view in Async: a ring of window counters, each the last synced
// global total plus what this process added since. It decides with the code of package
// algorithm (a single process that syncs after every decision decides exactly as the memory
// store does; async_test checks it): a fixed window as an algorithm.FixedWindow of its current
// window's view, a sliding window by copying the view into window, an algorithm.SlidingWindow,
// deciding there and adding what changed to its slots.
type keyState struct {
	key     string
	params  algorithm.Params // the rule, compiled
	sliding bool
	length  int64 // window length, ns
	slots   []slot
	window  algorithm.SlidingWindow // sliding windows: the view decided on (see view)
	cur     int64                   // newest window index decided in
	dirty   bool
	orphans []orphan
	// carried is the count carried over a rule change of shape by a fixed window, until the
	// end of the window it was counted in; sliding windows carry it in the current slot's
	// carried field instead. It is this process's view of units counted under the old shape,
	// never synced: every process carries its own view of the same global counters.
	carried algorithm.Carried
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
// algorithm.SlidingWindow does: a sliding window carries its estimate (SlidingWindow.Estimate
// of the view) into the new current sub-window; a fixed window carries its
// current window's count until that window's end (algorithm.FixedWindow keeps counting in the
// current window until it ends). Unsynced deltas are kept as orphans.
func (ks *keyState) reshape(r sluice.Rule, now int64) {
	if ks.cur != math.MinInt64 && ks.length == algorithm.WindowShape(r).Length {
		ks.rering(r)
		return
	}
	var carried algorithm.Carried
	if ks.cur != math.MinInt64 {
		if ks.sliding {
			carried.Count, now = ks.view().Estimate(now)
		} else if w := algorithm.WindowIndex(now, ks.length); w <= ks.cur {
			carried = algorithm.Carried{Count: ks.val(ks.cur) + ks.carriedAt(now), End: (ks.cur + 1) * ks.length}
		}
	}
	ks.reset(r)
	if carried.Count <= 0 {
		return
	}
	if ks.sliding {
		ks.cur = algorithm.WindowIndex(now, ks.length)
		ks.slotFor(ks.cur).carried = carried.Count
	} else {
		ks.carried = carried
	}
}

// rering reshapes the state for a rule whose windows have the same length (only the number
// of sub-windows, or fixed vs sliding, changed): the windows are the same ones, so their
// counters are kept as they are (those that fit the new ring), which is more exact than a
// carried estimate and keeps matching the store's counters of those windows.
func (ks *keyState) rering(r sluice.Rule) {
	old, cur, carried := ks.slots, ks.cur, ks.carried
	ks.slots = nil
	ks.reset(r)
	ks.carried = carried
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
	if now < ks.carried.End {
		return ks.carried.Count
	}
	return 0
}

// reset shapes the state for rule r with empty counters, keeping unsynced deltas as orphans.
func (ks *keyState) reset(r sluice.Rule) {
	ks.carried = algorithm.Carried{}
	for i := range ks.slots {
		s := &ks.slots[i]
		if s.pending != 0 {
			ks.orphans = append(ks.orphans, orphan{time.Duration(ks.length), s.idx, s.pending})
		}
	}
	ks.params = algorithm.Compile(r)
	ks.sliding = r.Algorithm == sluice.AlgorithmSlidingWindow
	shape := algorithm.WindowShape(r)
	ks.length = shape.Length
	ks.slots = make([]slot, shape.Count)
	ks.window = algorithm.SlidingWindow{}
	if ks.sliding {
		ks.window = algorithm.SlidingWindow{Counts: make([]int64, shape.Count), Sub: ks.length}
	}
	ks.cur = math.MinInt64
	for i := range ks.slots {
		ks.slots[i].idx = math.MinInt64
	}
}

// sameShape reports whether r counts in the same windows as the state.
func (ks *keyState) sameShape(r sluice.Rule) bool {
	if r.Algorithm != ks.params.Rule.Algorithm {
		return false
	}
	return r.Period == ks.params.Rule.Period && r.Windows() == ks.params.Rule.Windows()
}

// index is the position of window j's slot in the ring.
func (ks *keyState) index(j int64) int { return algorithm.RingIndex(j, int64(len(ks.slots))) }

func (ks *keyState) at(j int64) *slot { return &ks.slots[ks.index(j)] }

// val is the view of window j (0 when the ring holds no counter for it).
func (ks *keyState) val(j int64) int64 { return ks.slots[ks.index(j)].view(j) }

// view is the slot's view of window j (0 when it holds another window).
func (s *slot) view(j int64) int64 {
	if s.idx != j {
		return 0
	}
	return max(0, s.global+s.inflight+s.pending+s.carried)
}

// add adds n units to the view of window j, whose slot is at position i of the ring, of a
// sliding window: to its pending delta, or for a negative n (at most the view of window j) to
// its carried estimate first.
func (ks *keyState) add(i int, j, n int64) {
	s := ks.slotAt(i, j)
	if s == nil {
		return
	}
	if n < 0 {
		fromCarried := min(s.carried, -n)
		s.carried -= fromCarried
		n += fromCarried
	}
	s.pending += n
}

// slotFor returns window j's slot, recycling an older window's slot (its unsynced delta
// becomes an orphan), or nil when the slot holds a newer window.
func (ks *keyState) slotFor(j int64) *slot { return ks.slotAt(ks.index(j), j) }

// slotAt is slotFor with the ring position i of window j's slot already known.
func (ks *keyState) slotAt(i int, j int64) *slot {
	s := &ks.slots[i]
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

// view copies the view of the windows the ring holds, up to cur, into the sliding window.
func (ks *keyState) view() *algorithm.SlidingWindow {
	w := &ks.window
	w.Newest = ks.cur
	// The ring holds windows first..cur, one per slot: walk the positions rather than
	// dividing for each window's.
	for i, j := ks.index(ks.first()), ks.first(); j <= ks.cur; i, j = ks.next(i), j+1 {
		w.Counts[i] = ks.slots[i].view(j)
	}
	return w
}

// next is the ring position after i.
func (ks *keyState) next(i int) int {
	if i++; i == len(ks.slots) {
		return 0
	}
	return i
}

// decide decides n units at now under r (which has the state's shape), or settles them
// (sluice.Request.Settle), and adds what it counts (or refunds) to the pending deltas.
func (ks *keyState) decide(now int64, r sluice.Rule, n int64, settle bool) sluice.Decision {
	if r != ks.params.Rule { // same shape: a new limit applies at once
		ks.params = algorithm.Compile(r)
	}
	// now's window, or the newest one if the clock went backwards
	ks.cur = max(ks.cur, algorithm.WindowIndex(now, ks.length))
	if ks.sliding {
		return ks.takeSliding(now, n, settle)
	}
	return ks.takeFixed(now, n, settle)
}

// takeFixed decides a fixed window on the view of the current window, the carried count
// included, and adds what it counts (or takes back, the carried units first) to the pending
// delta. A settle applies n first (a charge as FixedWindow.Settle does, a refund as a refund)
// and reports as a peek, allowed.
func (ks *keyState) takeFixed(now, n int64, settle bool) sluice.Decision {
	own := ks.val(ks.cur)
	c := algorithm.Carried{Count: ks.carriedAt(now), End: ks.carried.End}
	carried := c.Count
	w := algorithm.FixedWindow{End: (ks.cur + 1) * ks.length, Count: own + carried}
	if settle {
		if n > 0 {
			w.Settle(now, &ks.params, n)
		} else if n < 0 {
			w.TakeCarrying(now, &ks.params, n, &c)
		}
		n = 0
	}
	d := w.TakeCarrying(now, &ks.params, n, &c)
	d.Allowed = d.Allowed || settle
	ks.carried.Count -= carried - c.Count
	if delta := w.Count - c.Count - own; delta != 0 {
		ks.slotFor(ks.cur).pending += delta
	}
	return d
}

// takeSliding decides (or settles) a sliding window on a copy of the view and adds what the
// decision changed (units counted, or taken back) to the slots.
func (ks *keyState) takeSliding(now, n int64, settle bool) sluice.Decision {
	w := ks.view()
	var d sluice.Decision
	if settle {
		d = w.Settle(now, &ks.params, n)
	} else {
		d = w.Take(now, &ks.params, n, 0)
	}
	same := true
	first := ks.first()
	if n > 0 {
		first = ks.cur // an admission counts in the newest window only
	}
	for i, j := ks.index(first), first; j <= ks.cur; i, j = ks.next(i), j+1 {
		if c, v := w.Counts[i], ks.slots[i].view(j); c != v {
			ks.add(i, j, c-v)
			same = same && ks.slots[i].view(j) == c
		}
	}
	if !same {
		// The units admitted went to a window whose view is below zero (this process took
		// back more than the store still counts) and are absorbed: ResetAfter is the view's.
		d.ResetAfter = ks.view().Take(now, &ks.params, 0, 0).ResetAfter
	}
	return d
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
