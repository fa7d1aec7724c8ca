package hotkey

import (
	"container/heap"
	"hash/maphash"
)

// countMinWidthPerValue is the Count-Min sketch's width per tracked value: with TopK = 1000,
// 32768 counters a row, 512 KiB for four rows.
const countMinWidthPerValue = 32

// sketch is a Space-Saving summary (Metwally, Agrawal, El Abbadi 2005) of at most k values:
// every value it holds has a count that is at least its true count and at most its true
// count plus its err; a value it does not hold has a true count of at most min() (0 until
// the sketch is full), which is at most total/k. It is not safe for concurrent use.
type sketch struct {
	k       int
	total   int64
	byValue map[string]*entry
	heap    entries   // a min-heap on count
	cm      *countMin // bounds the values not held
}

// entry is one value of a sketch.
type entry struct {
	value   string
	count   int64 // upper bound of the value's true count
	err     int64 // count - err is a lower bound
	denied  int64 // requests denied by the store, counted since the value entered
	charged bool  // its cold admissions were charged to the store (Param)
	index   int
}

// newSketch returns a sketch of k values, with a Count-Min sketch when bounds is set.
func newSketch(k int, bounds bool) *sketch {
	s := &sketch{k: k, byValue: make(map[string]*entry, k), heap: make(entries, 0, k)}
	if bounds {
		s.cm = newCountMin(countMinWidthPerValue*k, maphash.MakeSeed())
	}
	return s
}

// add counts n for value and returns its entry.
func (s *sketch) add(value string, n int64) *entry {
	s.total += n
	if s.cm != nil {
		s.cm.add(value, n)
	}
	if e := s.byValue[value]; e != nil {
		e.count += n
		heap.Fix(&s.heap, e.index)
		return e
	}
	if len(s.heap) < s.k {
		e := &entry{value: cloneString(value), count: n}
		s.byValue[e.value] = e
		heap.Push(&s.heap, e)
		return e
	}
	// Replace the minimum: the newcomer inherits its count as error.
	e := s.heap[0]
	delete(s.byValue, e.value)
	*e = entry{value: cloneString(value), count: e.count + n, err: e.count, index: 0}
	s.byValue[e.value] = e
	heap.Fix(&s.heap, 0)
	return e
}

// bound is an upper bound of value's true count: the least of its count when held (else
// min()) and the Count-Min estimate.
func (s *sketch) bound(value string) int64 {
	b := s.min()
	if e := s.byValue[value]; e != nil {
		b = e.count
	}
	if s.cm == nil {
		return b
	}
	return min(b, s.cm.estimate(value))
}

// min is the smallest count held when the sketch is full, else 0: no value outside the
// sketch has been seen more often.
func (s *sketch) min() int64 {
	if len(s.heap) < s.k {
		return 0
	}
	return s.heap[0].count
}

// reset empties the sketch, keeping its memory.
func (s *sketch) reset() {
	clear(s.byValue)
	clear(s.heap)
	s.heap, s.total = s.heap[:0], 0
	if s.cm != nil {
		s.cm.reset()
	}
}

// cloneString copies a value so that the sketch keeps no request buffer alive.
func cloneString(s string) string { return string([]byte(s)) }

type entries []*entry

func (h entries) Len() int           { return len(h) }
func (h entries) Less(i, j int) bool { return h[i].count < h[j].count }
func (h entries) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *entries) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *entries) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
