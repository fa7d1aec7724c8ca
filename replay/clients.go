package replay

import (
	"container/heap"
	"sort"

	"github.com/sluicehq/sluice/simulate"
)

// client is what a rule knows of one client key.
type client struct {
	key                       string
	requests, denials, agreed int64
	firstDenial, last         int64
	peak                      int64    // the most units it asked for in a period
	w                         *windows // while live; nil once idle
	prev, next                *client  // in the live or the idle list
}

// windows are the units a live client was admitted, and asked for, in the trailing period.
type windows struct {
	admitted, offered simulate.Window
}

// summary is a client's figures, kept after the client itself is dropped.
type summary struct {
	key                       string
	requests, denials, agreed int64
	firstDenial, peak         int64
}

func (c *client) summary() summary {
	return summary{key: c.key, requests: c.requests, denials: c.denials, agreed: c.agreed,
		firstDenial: c.firstDenial, peak: c.peak}
}

// merge adds the figures of a later visit of the same key.
func (s *summary) merge(o summary) {
	s.requests += o.requests
	s.denials += o.denials
	s.agreed += o.agreed
	if s.firstDenial == 0 || (o.firstDenial != 0 && o.firstDenial < s.firstDenial) {
		s.firstDenial = o.firstDenial
	}
	s.peak = max(s.peak, o.peak)
}

// list is a doubly linked list of clients, oldest first.
type list struct{ front, back *client }

func (l *list) pushBack(c *client) {
	c.prev, c.next = l.back, nil
	if l.back != nil {
		l.back.next = c
	} else {
		l.front = c
	}
	l.back = c
}

func (l *list) remove(c *client) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.front = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.back = c.prev
	}
	c.prev, c.next = nil, nil
}

// clientTable holds the clients of a rule in bounded memory. A client seen in the last
// period is live (its windows held, in the live list by last request); one idle for a period
// has its windows freed (an empty window changes no count) and joins the idle list. Past
// maxClients, the client idle the longest (else the live one seen the longest ago) is
// dropped: its peak goes to the histogram of rates, its figures to the top denied if they
// belong there; a key seen again after that counts as a new client.
type clientTable struct {
	period      int64
	maxClients  int
	byKey       map[string]*client
	live, idle  list
	rates       histogram // the peaks of the dropped clients
	top         *topSet
	dropped     int64 // clients dropped
	droppedLive int64 // of which live: their reference restarted if they came back within a period
}

func newClientTable(period int64, maxClients, topK int) *clientTable {
	return &clientTable{period: period, maxClients: maxClients, byKey: make(map[string]*client),
		top: newTopSet(topK)}
}

// get returns the client of key at instant at, moved to the back of the live list.
func (t *clientTable) get(key string, at int64) *client {
	t.expire(at)
	c := t.byKey[key]
	switch {
	case c == nil:
		if len(t.byKey) >= t.maxClients {
			t.drop()
		}
		c = &client{key: key}
		t.byKey[key] = c
	case c.w == nil:
		t.idle.remove(c)
	default:
		t.live.remove(c)
	}
	if c.w == nil {
		c.w = t.windows()
	}
	c.last = at
	t.live.pushBack(c)
	return c
}

// expire frees the windows of the clients idle for a period at instant at.
func (t *clientTable) expire(at int64) {
	for c := t.live.front; c != nil && c.last <= at-t.period; c = t.live.front {
		t.live.remove(c)
		t.release(c)
		t.idle.pushBack(c)
	}
}

// windows returns the empty windows of a client turning live.
func (t *clientTable) windows() *windows {
	return &windows{admitted: simulate.Window{Period: t.period}, offered: simulate.Window{Period: t.period}}
}

// release frees a client's windows: an idle client's are empty, and would change no count.
func (t *clientTable) release(c *client) { c.w = nil }

// drop drops one client to make room.
func (t *clientTable) drop() {
	from := &t.idle
	if from.front == nil {
		from = &t.live
		t.droppedLive++
	}
	c := from.front
	from.remove(c)
	t.release(c)
	delete(t.byKey, c.key)
	t.rates.add(c.peak, 1)
	t.top.offer(c.summary())
	t.dropped++
}

// finish returns the histogram of every client's peak rate and the top denied clients, the
// clients held and the dropped ones together.
func (t *clientTable) finish() (histogram, []summary) {
	h := histogram{}
	h.merge(&t.rates)
	for _, c := range t.byKey {
		h.add(c.peak, 1)
		t.top.offer(c.summary())
	}
	return h, t.top.sorted()
}

// topSet keeps the k summaries with the most denials (then requests), merging the visits of
// one key. It holds at most k + the keys offered twice.
type topSet struct {
	k     int
	byKey map[string]*topEntry
	heap  topHeap
}

type topEntry struct {
	s     summary
	index int
}

func newTopSet(k int) *topSet { return &topSet{k: k, byKey: make(map[string]*topEntry)} }

// worse orders summaries: fewer denials, then fewer requests, then the greater key.
func worse(a, b *summary) bool {
	if a.denials != b.denials {
		return a.denials < b.denials
	}
	if a.requests != b.requests {
		return a.requests < b.requests
	}
	return a.key > b.key
}

func (t *topSet) offer(s summary) {
	if t.k <= 0 || s.denials == 0 {
		return
	}
	if e := t.byKey[s.key]; e != nil {
		e.s.merge(s)
		heap.Fix(&t.heap, e.index)
		return
	}
	if len(t.heap) < t.k {
		e := &topEntry{s: s}
		t.byKey[s.key] = e
		heap.Push(&t.heap, e)
		return
	}
	if min := t.heap[0]; worse(&min.s, &s) {
		delete(t.byKey, min.s.key)
		min.s = s
		t.byKey[s.key] = min
		heap.Fix(&t.heap, 0)
	}
}

// sorted returns the summaries, most denials first.
func (t *topSet) sorted() []summary {
	out := make([]summary, 0, len(t.heap))
	for _, e := range t.heap {
		out = append(out, e.s)
	}
	sort.Slice(out, func(i, j int) bool { return worse(&out[j], &out[i]) })
	return out
}

type topHeap []*topEntry

func (h topHeap) Len() int           { return len(h) }
func (h topHeap) Less(i, j int) bool { return worse(&h[i].s, &h[j].s) }
func (h topHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *topHeap) Push(x any) {
	e := x.(*topEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *topHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
