package redis

import (
	_ "embed"
	"encoding/binary"
	"math"
	"math/bits"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// The scripts the store runs, assembled from lua/*.lua by `go generate` (gen.go, package
// internal/luagen) into lua/gen, where a reviewer reads what Redis executes; a test fails
// when they are stale.
//
//go:generate go run gen.go
var (
	//go:embed lua/gen/fixed_window.lua
	fixedWindowLua string
	//go:embed lua/gen/fixed_window_multi.lua
	fixedWindowMultiLua string
	//go:embed lua/gen/fixed_window_holdback.lua
	fixedWindowHoldbackLua string
	//go:embed lua/gen/fixed_window_budget.lua
	fixedWindowBudgetLua string
	//go:embed lua/gen/sliding_log.lua
	slidingLogLua string
	//go:embed lua/gen/sliding_log_holdback.lua
	slidingLogHoldbackLua string
	//go:embed lua/gen/sliding_log_budget.lua
	slidingLogBudgetLua string
	//go:embed lua/gen/sliding_window.lua
	slidingWindowLua string
	//go:embed lua/gen/sliding_window_multi.lua
	slidingWindowMultiLua string
	//go:embed lua/gen/sliding_window_holdback.lua
	slidingWindowHoldbackLua string
	//go:embed lua/gen/sliding_window_budget.lua
	slidingWindowBudgetLua string
	//go:embed lua/gen/bucket.lua
	bucketLua string
	//go:embed lua/gen/bucket_multi.lua
	bucketMultiLua string
	//go:embed lua/gen/bucket_holdback.lua
	bucketHoldbackLua string
	//go:embed lua/gen/bucket_budget.lua
	bucketBudgetLua string
	//go:embed lua/gen/gcra.lua
	gcraLua string
	//go:embed lua/gen/gcra_multi.lua
	gcraMultiLua string
	//go:embed lua/gen/gcra_holdback.lua
	gcraHoldbackLua string
	//go:embed lua/gen/gcra_budget.lua
	gcraBudgetLua string
)

// script is one algorithm's Lua source and its SHA1 for EVALSHA, with its variants.
type script struct {
	name  string
	src   string
	sha   string
	multi *script // decides for many keys of one slot in one call; nil: one key per call
	// holdback decides a request with a criticality holdback (lua/holdback.lua), budget a
	// budget step (lua/budget.lua); nil for the variants themselves.
	holdback *script
	budget   *script
	extra    bool // the script takes an extra argument, ARGV[2] (ARGV[K+i] in multi); none does today
	// next: the reply's delay is instead when the next unit frees after an allowed take that
	// leaves nothing (sluice.Decision.NextAfter): a window algorithm's, which never delays.
	next bool
	// budgetStep: the script is a budget variant, whose one-byte replies are errors
	// (budgetError).
	budgetStep bool
}

// newScript returns the script name of source src, with its batched variant of source multi
// ("": none), its criticality variant of source holdback and its budget variant of source
// budget; next: its replies tell when the next unit frees (script.next; not the variants',
// which answer 0 there).
func newScript(name string, extra, next bool, src, multi, holdback, budget string) *script {
	variant := func(name, src string) *script {
		return &script{name: name, src: src, sha: sha1Hex(src), extra: extra, next: next}
	}
	sc := variant(name, src)
	if multi != "" {
		sc.multi = variant(name+"/multi", multi)
	}
	sc.holdback = variant(name+"/holdback", holdback)
	sc.holdback.next = false
	sc.budget = variant(name+"/budget", budget)
	sc.budget.next, sc.budget.budgetStep = false, true
	return sc
}

var (
	fixedWindowScript   = newScript("fixed_window", false, true, fixedWindowLua, fixedWindowMultiLua, fixedWindowHoldbackLua, fixedWindowBudgetLua)
	slidingLogScript    = newScript("sliding_log", false, false, slidingLogLua, "", slidingLogHoldbackLua, slidingLogBudgetLua)
	slidingWindowScript = newScript("sliding_window", false, true, slidingWindowLua, slidingWindowMultiLua, slidingWindowHoldbackLua, slidingWindowBudgetLua)
	bucketScript        = newScript("bucket", false, false, bucketLua, bucketMultiLua, bucketHoldbackLua, bucketBudgetLua)
	gcraScript          = newScript("gcra", false, false, gcraLua, gcraMultiLua, gcraHoldbackLua, gcraBudgetLua)
)

// params packs a script's ARGV[1]: little-endian doubles, the clock (Unix ms, ns within the
// ms, shortest TTL in ms; see lua/prelude.lua), then the algorithm's parameters, then the
// settle's debt bound (0 for a decision). One
// struct.unpack in Lua costs Redis less than a tonumber per argument. Integers up to 2^53 are
// exact; larger ones round to the nearest double, as tonumber rounds their decimal form.
type params []byte

// paramsLen is the length of a script's parameters: ten doubles, the algorithm's zeros past
// their last, and the settle's debt bound last (see settleParam).
const paramsLen = 8 * 10

// settleParam is P7, the last parameter: 0 for a decision, and for a settle the most units it
// may charge past the rule's capacity (algorithm.MaxDebt, at least 1).
func settleParam(p params, req *sluice.Request) params {
	for len(p) < paramsLen-8 {
		p = p.add(0)
	}
	if req.Kind() != sluice.KindSettle {
		return p.add(0)
	}
	return p.add(algorithm.MaxDebt(req.Rule))
}

func (p params) add(x int64) params {
	return binary.LittleEndian.AppendUint64(p, math.Float64bits(float64(x)))
}

// scriptArgs returns the script deciding req and its parameters, after the clock fields.
func scriptArgs(p params, req *sluice.Request) (*script, params) {
	r := req.Rule
	pms := int64(r.Period / time.Millisecond)
	maxDelay := int64(req.MaxDelay)
	switch r.Algorithm {
	case sluice.AlgorithmFixedWindow:
		return fixedWindowScript, p.add(req.N).add(r.Limit).add(pms)
	case sluice.AlgorithmSlidingLog:
		return slidingLogScript, p.add(req.N).add(r.Limit).add(pms)
	case sluice.AlgorithmSlidingWindow:
		w := r.Windows()
		return slidingWindowScript, p.add(req.N).add(r.Limit).add(w).add(pms / w)
	case sluice.AlgorithmTokenBucket:
		return bucketScript, p.add(req.N).add(maxDelay).add(r.Limit).add(pms).add(r.Capacity()).add(0)
	case sluice.AlgorithmLeakyBucket:
		return bucketScript, p.add(req.N).add(maxDelay).add(r.Limit).add(pms).add(r.Capacity()).add(1)
	default: // sluice.AlgorithmGCRA; Validate rejected the rest
		t := algorithm.Interval(r)
		return gcraScript, p.add(req.N).add(maxDelay).add(t).add(satMul(r.Capacity(), t)).add(r.Capacity())
	}
}

// satMul returns a*b for a, b >= 0, saturating at math.MaxInt64.
func satMul(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}
