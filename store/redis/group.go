package redis

import goredis "github.com/redis/go-redis/v9"

// batching is how a store may put several decisions into one script call.
type batching uint8

const (
	batchNone   batching = iota // one call per decision (a client whose routing is unknown)
	batchAll                    // one key space: any keys may share a call
	batchBySlot                 // Redis Cluster: only keys of one hash slot may share a call
)

// batchingOf returns how decisions on client may be batched.
func batchingOf(client goredis.UniversalClient) batching {
	switch client.(type) {
	case *goredis.Client:
		return batchAll
	case *goredis.ClusterClient:
		return batchBySlot
	}
	return batchNone
}

// group is the calls of one script call: one call on its own, or several calls of one
// batched script on keys of one slot, in queue order.
type group struct {
	calls []*call
	args  []any
	cmd   noRetry
}

// script returns the script the group's call runs.
func (g *group) script() *script {
	if len(g.calls) == 1 {
		return g.calls[0].script
	}
	return g.calls[0].script.multi
}

// groupKey identifies the groups that may take a call.
type groupKey struct {
	script *script
	slot   uint16
}

// batcher is one pipeline leader's reusable memory for grouping batches.
type batcher struct {
	batch  []*call          // the calls of the pipeline (lead)
	gid    []int            // gid[i]: the group of live call i
	size   []int            // calls per group
	calls  []*call          // the calls, group after group
	groups []group          // in the order their first calls were queued
	open   map[groupKey]int // the group a call of that script and slot joins
	args   []any            // the batched calls' arguments
	now    []*call          // split: the calls of this pipeline
	script map[string]*script
}

func newBatcher(maxBatch int) *batcher {
	return &batcher{
		batch:  make([]*call, 0, maxBatch),
		gid:    make([]int, 0, maxBatch),
		size:   make([]int, 0, maxBatch),
		calls:  make([]*call, maxBatch),
		groups: make([]group, 0, maxBatch),
		open:   make(map[groupKey]int),
		args:   make([]any, 0, 3*maxBatch+3),
		now:    make([]*call, 0, maxBatch),
		script: make(map[string]*script),
	}
}

// split divides live (in queue order) into the calls to send in this pipeline and those to
// send after it: once a key has had a call of one script, its calls of another script, and
// every call of that key after them, wait for a later pipeline. So within one pipeline a key
// is decided by one script only, and its calls keep their queue order even when some of the
// pipeline's calls meet NOSCRIPT and are sent again after the others (calls of one script on
// one node all meet it or none does). Only a key decided under two algorithms in one batch
// takes this path; it costs that batch one more round trip.
func (b *batcher) split(live []*call) (now, later []*call) {
	clear(b.script)
	now = b.now[:0]
	for _, c := range live {
		key := c.args[3].(string)
		prev, seen := b.script[key]
		switch {
		case !seen:
			b.script[key] = c.script
		case prev != c.script: // nil: the key already waits
			b.script[key] = nil
			later = append(later, c)
			continue
		}
		now = append(now, c)
	}
	b.now = now
	return now, later
}

// group splits live (in queue order, each key under one script: see split) into groups, to be
// sent in the returned order: calls of one batched script on keys that may share a call
// (mode) go into one group, in queue order, others alone.
func (b *batcher) group(live []*call, mode batching) []group {
	b.gid = b.gid[:0]
	b.size = b.size[:0]
	b.groups = b.groups[:0]
	b.args = b.args[:0]
	switch {
	case mode == batchNone || len(live) == 1:
		for i := range live {
			b.gid = append(b.gid, i)
			b.size = append(b.size, 1)
		}
	case mode == batchAll && sameScript(live) && live[0].script.multi != nil:
		b.gid = append(b.gid, make([]int, len(live))...)
		b.size = append(b.size, len(live))
	default:
		b.assign(live, mode)
	}
	// lay the calls out group after group (a counting sort, stable)
	if len(b.calls) < len(live) {
		b.calls = make([]*call, len(live))
	}
	off := 0
	for _, n := range b.size {
		b.groups = append(b.groups, group{calls: b.calls[off : off : off+n]})
		off += n
	}
	for i, c := range live {
		g := &b.groups[b.gid[i]]
		g.calls = append(g.calls, c)
	}
	return b.groups
}

// assign sets gid and size for the general case: several scripts, or Cluster slots. Each key
// has one script (split), so all its calls of a batched script join one group.
func (b *batcher) assign(live []*call, mode batching) {
	clear(b.open)
	for _, c := range live {
		g := -1
		if c.script.multi != nil {
			gk := groupKey{script: c.script}
			if mode == batchBySlot {
				gk.slot = slot(c.args[3].(string))
			}
			var ok bool
			if g, ok = b.open[gk]; !ok {
				g = len(b.size)
				b.size = append(b.size, 0)
				b.open[gk] = g
			}
		} else {
			g = len(b.size)
			b.size = append(b.size, 0)
		}
		b.size[g]++
		b.gid = append(b.gid, g)
	}
}

// sameScript reports whether all calls run one script.
func sameScript(calls []*call) bool {
	for _, c := range calls[1:] {
		if c.script != calls[0].script {
			return false
		}
	}
	return true
}
