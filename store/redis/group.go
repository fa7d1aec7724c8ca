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

// batcher is one worker's reusable memory for grouping batches.
type batcher struct {
	gid    []int            // gid[i]: the group of live call i
	size   []int            // calls per group
	calls  []*call          // the calls, group after group
	groups []group          // in the order their first calls were queued
	open   map[groupKey]int // the group a call of that script and slot joins
	last   map[string]int   // the group of a key's latest call
	args   []any            // the batched calls' arguments
}

func newBatcher(maxBatch int) *batcher {
	return &batcher{
		gid:    make([]int, 0, maxBatch),
		size:   make([]int, 0, maxBatch),
		calls:  make([]*call, maxBatch),
		groups: make([]group, 0, maxBatch),
		open:   make(map[groupKey]int),
		last:   make(map[string]int),
		args:   make([]any, 0, 3*maxBatch+3),
	}
}

// group splits live (in queue order) into groups, to be sent in the returned order: calls of
// one batched script on keys that may share a call (mode) go into one group, others alone.
// Each key's calls keep their queue order: a call never joins a group sent before the group
// of its key's previous call (a key decided under two algorithms in one batch), it opens a
// new one instead.
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
		b.assign(live, mode, !sameScript(live))
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

// assign sets gid and size for the general case: several scripts, or Cluster slots. With one
// script (mixed false), each key has one group, so queue order holds with no bookkeeping.
func (b *batcher) assign(live []*call, mode batching, mixed bool) {
	clear(b.open)
	if mixed {
		clear(b.last)
	}
	for _, c := range live {
		key := c.args[3].(string)
		g := -1
		if c.script.multi != nil {
			gk := groupKey{script: c.script}
			if mode == batchBySlot {
				gk.slot = slot(key)
			}
			var ok bool
			if g, ok = b.open[gk]; !ok {
				g = -1
			} else if mixed {
				if h, seen := b.last[key]; seen && h > g {
					g = -1 // the key's previous call goes after that group
				}
			}
			if g < 0 {
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
		if mixed {
			b.last[key] = g
		}
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
