package regions

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/wire"
	"github.com/sluicehq/sluice/quota/alloc"
)

// Parts is what a whole limit is split into: a region's share is a number of parts per
// million of the limit (a rule scaled to it admits that part of the limit, rounded down).
const Parts = 1_000_000

// maxChanges bounds the changes a history keeps per region: past it, the two oldest merge
// into one as large (which only ever counts more).
const maxChanges = 32

// history is one key's escrow: for every region, the parts of the limit it holds from each
// epoch on, up to the last epoch allocated. Epochs are allocated in order, each once, and
// never changed after (the coordinator sees to it): what a region read of an epoch is what
// every other region reads of it. An epoch never allocated (after last, or in a gap) gives
// every region nothing.
type history struct {
	epoch   int64 // the epoch length, ns
	any     bool  // whether an epoch was ever allocated
	last    int64 // the last epoch allocated
	regions []string
	changes [][]change // per region, by ascending from
}

// change says a region holds parts from epoch from on (until its next change).
type change struct{ from, parts int64 }

// index returns the position of region in h, adding it when add (else -1).
func (h *history) index(region string, add bool) int {
	if i := slices.Index(h.regions, region); i >= 0 || !add {
		return i
	}
	h.regions = append(h.regions, region)
	h.changes = append(h.changes, nil)
	return len(h.regions) - 1
}

// share returns the parts region r holds at epoch e.
func (h *history) share(r int, e int64) int64 {
	if r < 0 || !h.any || e > h.last {
		return 0
	}
	cs := h.changes[r]
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].from <= e {
			return cs[i].parts
		}
	}
	return 0
}

// held returns the most parts region r held at any epoch of [from, to].
func (h *history) held(r int, from, to int64) int64 {
	if r < 0 || !h.any {
		return 0
	}
	to = min(to, h.last)
	most := h.share(r, from)
	for _, c := range h.changes[r] {
		if c.from > from && c.from <= to {
			most = max(most, c.parts)
		}
	}
	return most
}

// clone returns a copy of h to change.
func (h *history) clone() *history {
	c := &history{epoch: h.epoch, any: h.any, last: h.last, regions: slices.Clone(h.regions), changes: make([][]change, len(h.changes))}
	for i, cs := range h.changes {
		c.changes[i] = slices.Clone(cs)
	}
	return c
}

// record allocates epoch m (after last) with parts per region of h.regions: the epochs
// between last and m are gaps (nothing held), and the changes before keep are dropped but
// the one in force at keep.
func (h *history) record(m int64, parts []int64, keep int64) {
	for r := range h.regions {
		if h.any && m > h.last+1 && h.share(r, h.last) != 0 {
			h.changes[r] = append(h.changes[r], change{h.last + 1, 0})
		}
		p := int64(0)
		if r < len(parts) {
			p = parts[r]
		}
		if !h.any || h.share(r, m-1) != p || len(h.changes[r]) == 0 {
			h.changes[r] = append(h.changes[r], change{m, p})
		}
		cs := h.changes[r]
		drop := 0
		for drop+1 < len(cs) && cs[drop+1].from <= keep {
			drop++
		}
		cs = cs[drop:]
		for len(cs) > maxChanges {
			cs[1] = change{cs[0].from, max(cs[0].parts, cs[1].parts)}
			cs = cs[1:]
		}
		h.changes[r] = cs
	}
	h.any, h.last = true, m
}

// allocate returns the parts each region of h.regions holds at epoch m (after h.last): its
// target, when that is no more than what it holds anyway, and otherwise that plus its part
// of what the others' holdings leave free, in proportion to what it lacks. What a region
// holds anyway is the most it held over the cool epochs before m; for a rule whose store
// forgets on a lowered limit what it admitted before (forgets: the sliding log keeps the
// newest 2 x limit timestamps), at most twice the least it held, since what it forgot may
// still count. So for every epoch, the regions' largest holdings over it and the cool
// epochs before it, and what a forgetting store regrew past what it remembers, sum to at
// most Parts: a share one region gives up goes to another only once nothing the first
// admitted under it can still count.
func (h *history) allocate(m, cool int64, target []int64, forgets bool) []int64 {
	n := len(h.regions)
	base := make([]int64, n)
	out := make([]int64, n)
	free := int64(Parts)
	var wanted int64
	for r := range n {
		held := h.held(r, m-cool, m-1)
		free -= held
		base[r] = held
		if forgets {
			base[r] = min(held, 2*h.least(r, m-cool, m-1))
		}
		if target[r] <= base[r] {
			out[r] = target[r]
		} else {
			wanted += target[r] - base[r]
		}
	}
	free = max(free, 0)
	for r := range n {
		if want := target[r] - base[r]; want > 0 {
			give := want
			if wanted > free {
				give = int64(float64(free) * float64(want) / float64(wanted))
			}
			out[r] = base[r] + give
		}
	}
	return out
}

// least returns the fewest parts region r held at any epoch of [from, to] (an epoch never
// allocated holds none).
func (h *history) least(r int, from, to int64) int64 {
	if r < 0 || !h.any || to > h.last {
		return 0
	}
	least := h.share(r, from)
	for _, c := range h.changes[r] {
		if c.from > from && c.from <= to {
			least = min(least, c.parts)
		}
	}
	if cs := h.changes[r]; len(cs) == 0 || cs[0].from > from {
		return 0 // from is before the oldest change kept: unknown, so none
	}
	return least
}

// forgets reports whether a store deciding rule keeps less of what it admitted when its
// limit is lowered (the sliding log keeps its newest 2 x limit timestamps, in memory and in
// Redis: algorithm.MaxDebt): a region's share of such a rule regrows freely only to twice
// the least it held, not the most.
func forgets(rule sluice.Rule) bool { return rule.Algorithm == sluice.AlgorithmSlidingLog }

// targets splits Parts among the regions of h.regions by max-min fairness over their
// demands (in units per period of a limit of limit units; a region not live gets none).
func (h *history) targets(limit int64, demand map[string]float64, live func(string) bool) []int64 {
	idx := make([]int, 0, len(h.regions))
	d := make([]float64, 0, len(h.regions))
	for r, name := range h.regions {
		if live(name) {
			idx = append(idx, r)
			d = append(d, demand[name]*Parts/float64(max(limit, 1)))
		}
	}
	split := make([]int64, len(d))
	alloc.MaxMinFair(Parts, d, split)
	out := make([]int64, len(h.regions))
	for i, r := range idx {
		out[r] = split[i]
	}
	return out
}

// scale returns rule scaled to parts of Parts: its limit, and its burst, rounded down, so
// that the regions' scaled rules never sum to more than the rule; ok is false when the
// scaled rule admits nothing.
func scale(rule sluice.Rule, parts int64) (sluice.Rule, bool) {
	if parts <= 0 {
		return rule, false
	}
	r := rule
	r.Limit = mulParts(rule.Limit, parts)
	if rule.Burst > 0 {
		r.Burst = mulParts(rule.Burst, parts)
		if r.Burst <= 0 {
			return rule, false
		}
	}
	return r, r.Limit > 0
}

func mulParts(v, parts int64) int64 { return int64(math.Floor(float64(v) * float64(parts) / Parts)) }

// ruleMemory is how long what a rule admitted can still count against it: one period for the
// windows, the time to refill the burst (at least a period) for the buckets. A share is
// handed from one region to another only after it.
func ruleMemory(rule sluice.Rule) int64 {
	p := int64(rule.Period)
	if c := rule.Capacity(); c > rule.Limit && rule.Limit > 0 {
		return int64(float64(p) * float64(c) / float64(rule.Limit))
	}
	return p
}

// errCorrupt is returned for bytes encode did not write.
var errCorrupt = errors.New("regions: corrupt escrow state")

const historyVersion = 1

// encode appends h's binary form to dst.
func (h *history) encode(dst []byte) []byte {
	dst = append(dst, historyVersion)
	dst = binary.AppendVarint(dst, h.epoch)
	if !h.any {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendVarint(dst, h.last)
	dst = binary.AppendUvarint(dst, uint64(len(h.regions)))
	for r, name := range h.regions {
		dst = wire.AppendString(dst, name)
		dst = binary.AppendUvarint(dst, uint64(len(h.changes[r])))
		for _, c := range h.changes[r] {
			dst = binary.AppendVarint(dst, c.from)
			dst = binary.AppendVarint(dst, c.parts)
		}
	}
	return dst
}

// decodeHistory decodes what encode wrote.
func decodeHistory(b []byte) (*history, error) {
	d := wire.NewReader(b)
	if d.Byte() != historyVersion {
		return nil, errCorrupt
	}
	h := &history{epoch: d.Varint(), any: d.Byte() == 1}
	if h.any {
		h.last = d.Varint()
		n := d.Uvarint()
		if n > 1024 {
			return nil, errCorrupt
		}
		for i := uint64(0); i < n && !d.Failed(); i++ {
			h.regions = append(h.regions, d.String(256))
			m := d.Uvarint()
			if m > maxChanges+2 {
				return nil, errCorrupt
			}
			cs := make([]change, 0, m)
			for j := uint64(0); j < m && !d.Failed(); j++ {
				cs = append(cs, change{d.Varint(), d.Varint()})
			}
			h.changes = append(h.changes, cs)
		}
	}
	if d.Failed() || d.Len() != 0 || h.epoch <= 0 {
		return nil, errCorrupt
	}
	return h, nil
}
