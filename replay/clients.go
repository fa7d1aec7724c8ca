package replay

import (
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
	rates       histogram        // the peaks of the dropped clients
	top         *topSet[summary] // dropped clients with denials
	dropped     int64            // clients dropped
	droppedLive int64            // of which live: their reference restarted if they came back within a period
}

func newClientTable(period int64, maxClients, topK int) *clientTable {
	return &clientTable{period: period, maxClients: maxClients, byKey: make(map[string]*client),
		top: newTopDenied(topK)}
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
	if c.denials > 0 {
		t.top.offer(c.summary())
	}
	t.dropped++
}

// finish returns the histogram of every client's peak rate and the top denied clients, the
// clients held and the dropped ones together.
func (t *clientTable) finish() (histogram, []summary) {
	h := histogram{}
	h.merge(&t.rates)
	for _, c := range t.byKey {
		h.add(c.peak, 1)
		if c.denials > 0 {
			t.top.offer(c.summary())
		}
	}
	return h, t.top.sorted()
}

// topSet keeps the k items with the most weight (worse orders them), merging the items of
// one key, in bounded memory: it holds at most 2 x k, and when it would hold more, keeps
// the k best. An item dropped then offered again starts afresh.
type topSet[T any] struct {
	k     int
	key   func(*T) string
	worse func(a, b *T) bool
	merge func(into *T, from T)
	byKey map[string]*T
}

func newTopSet[T any](k int, key func(*T) string, worse func(a, b *T) bool, merge func(into *T, from T)) *topSet[T] {
	return &topSet[T]{k: k, key: key, worse: worse, merge: merge, byKey: make(map[string]*T)}
}

func (t *topSet[T]) offer(x T) {
	if t.k <= 0 {
		return
	}
	k := t.key(&x)
	if e := t.byKey[k]; e != nil {
		t.merge(e, x)
		return
	}
	t.byKey[k] = &x
	if len(t.byKey) > 2*t.k {
		for _, y := range t.all()[t.k:] {
			delete(t.byKey, t.key(&y))
		}
	}
}

// all returns every item held, the best first.
func (t *topSet[T]) all() []T {
	out := make([]T, 0, len(t.byKey))
	for _, x := range t.byKey {
		out = append(out, *x)
	}
	sort.Slice(out, func(i, j int) bool { return t.worse(&out[j], &out[i]) })
	return out
}

// sorted returns the k best, the best first.
func (t *topSet[T]) sorted() []T {
	all := t.all()
	return all[:min(len(all), t.k)]
}

// newTopDenied is the top of a rule's clients: the most denials, then the most requests.
func newTopDenied(k int) *topSet[summary] {
	return newTopSet(k, func(s *summary) string { return s.key }, func(a, b *summary) bool {
		if a.denials != b.denials {
			return a.denials < b.denials
		}
		if a.requests != b.requests {
			return a.requests < b.requests
		}
		return a.key > b.key
	}, func(into *summary, from summary) { into.merge(from) })
}
