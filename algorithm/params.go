package algorithm

import (
	"sync"

	"github.com/sluicehq/sluice"
)

// Params is a rule compiled for fast decisions: the divisions every decision would otherwise
// repeat are done once. Stores that keep state per key keep one Params per distinct rule (see
// store/memory); others compile the rule before each State.Take.
//
// A Params is read-only after Compile and safe to share between goroutines.
type Params struct {
	// Rule is the rule the params were compiled from.
	Rule sluice.Rule

	capacity int64
	period   int64
	sub      int64 // sliding window: sub-window length
	windows  int64 // sliding window: sub-window count

	// Buckets, in fixed point with Scale sub-units per unit.
	full   int64 // capacity x Scale
	fill   ratio // sub-units per ns: Limit x Scale / Period
	drain  ratio // ns per sub-unit: Period / (Limit x Scale)
	fillPS int64 // Limit x Scale

	// GCRA.
	interval int64 // ns per unit, rounded up
	window   int64 // capacity x interval
	perUnit  ratio // 1 / interval

	coarseTick int64 // the longest clock tick during which at most 1% of capacity refills

	maxDebt int64 // the most units a settle may charge past the capacity (see MaxDebt)
}

// ToleratesTick reports whether a clock that advances in steps of tick can decide this rule
// without changing any decision by more than 1% of its capacity: one step's worth of refill
// (Limit x tick / Period) is at most Capacity / 100. Stores use it to pick a coarse clock for
// the rules that can afford one.
func (p *Params) ToleratesTick(tick int64) bool { return tick <= p.coarseTick }

// Compile precomputes the parameters of a valid rule (see sluice.Rule.Validate); an invalid
// rule gives meaningless params.
func Compile(r sluice.Rule) Params {
	p := Params{Rule: r, capacity: r.Capacity(), period: int64(r.Period)}
	if r.Limit <= 0 || p.period <= 0 {
		return p
	}
	p.windows, p.sub = r.Windows(), WindowShape(r).Length
	p.fillPS = r.Limit * Scale
	p.full = p.capacity * Scale
	p.fill = newRatio(p.fillPS, p.period)
	p.drain = newRatio(p.period, p.fillPS)
	p.interval = Interval(r)
	p.window = p.capacity * p.interval
	p.perUnit = newRatio(1, p.interval)
	p.coarseTick = mulDiv(p.period, p.capacity, 100*r.Limit)
	p.maxDebt = MaxDebt(r)
	return p
}

// MaxDebt is the most units a settle (State.Settle) may charge a key past the capacity of a
// valid rule r: a larger debt is capped there, so every debt is paid within one period of its
// rule and no key outlives its rule's bounds because of one (a settle once kept a key of a
// daily rule for 367 days). For the bucket algorithms and GCRA it is what the rule refills in
// one Period (at one unit per Interval: Limit units, at least 1), so a key in debt is back to
// full within Period plus the time its capacity takes to refill; for the sliding log it is
// Limit, so the log holds at most 2 x Limit timestamps (see SlidingLog), which age out within
// the Period; for the fixed and sliding windows, sluice.MaxLimit units: their debt leaves with
// its window (the sliding window's within Period + Period/SubWindows) whatever its size.
func MaxDebt(r sluice.Rule) int64 {
	switch {
	case r.Algorithm == sluice.AlgorithmSlidingLog:
		return r.Limit
	case r.Algorithm.Bucket():
		return max(1, min(sluice.MaxLimit, int64(r.Period)/Interval(r)))
	}
	return sluice.MaxLimit
}

// BudgetDebt is the debt bound of a budget step (sluice.Request.Budget) under a valid rule r:
// MaxDebt, or r's capacity when that is more (a bucket whose burst is above its Limit). A
// bounded reservation holds up to a capacity past the limit, and the state must count all it
// holds, or a commit would give back units it never charged; so such a key may take up to
// its capacity at the refill rate to pay, rather than one period.
func BudgetDebt(r sluice.Rule) int64 { return max(MaxDebt(r), r.Capacity()) }

// maxCachedParams bounds a ParamsCache.
const maxCachedParams = 4096

// ParamsCache shares the compiled form of rules between the keys (and decisions) that use
// them: up to 4096 distinct rules are kept, and past that each caller gets its own copy. The
// zero ParamsCache is ready to use; it is safe for concurrent use.
type ParamsCache struct {
	mu sync.Mutex
	m  map[sluice.Rule]*Params
}

// Get returns the compiled form of a valid rule.
func (c *ParamsCache) Get(r sluice.Rule) *Params {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.m[r]; ok {
		return p
	}
	p := Compile(r)
	if c.m == nil {
		c.m = make(map[sluice.Rule]*Params)
	}
	if len(c.m) < maxCachedParams {
		c.m[r] = &p
	}
	return &p
}
