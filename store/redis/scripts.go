package redis

import (
	"crypto/sha1"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/bits"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

var (
	//go:embed lua/prelude.lua
	preludeLua string
	//go:embed lua/fixed_window.lua
	fixedWindowLua string
	//go:embed lua/sliding_log.lua
	slidingLogLua string
	//go:embed lua/sliding_window.lua
	slidingWindowLua string
	//go:embed lua/bucket.lua
	bucketLua string
	//go:embed lua/gcra.lua
	gcraLua string
	//go:embed lua/multi.lua
	multiLua string
	//go:embed lua/reserve.lua
	reserveLua string
	//go:embed lua/muldiv.lua
	muldivLua string
	//go:embed lua/persist.lua
	persistLua string
)

// snippets are the pieces of Lua spliced into the scripts (see splice.go); muldivFunc is the
// function muldiv, a helper of the bucket and sliding window scripts.
var snippets, muldivFunc = func() (map[string]*snippet, string) {
	sn := map[string]*snippet{}
	rest := defineSnippets(sn, muldivLua, persistLua)
	return sn, rest[0]
}()

// script is one algorithm's Lua source and its SHA1 for EVALSHA, with its batched variant.
type script struct {
	name  string
	src   string
	sha   string
	multi *script // decides for many keys of one slot in one call; nil: one key per call
	// reserve decides a request with a criticality reserve (lua/reserve.lua); nil for the
	// variants themselves.
	reserve *script
	extra   bool // the script takes an extra argument, ARGV[2] (ARGV[K+i] in multi)
}

// Markers splitting the Lua files (see lua/prelude.lua and lua/multi.lua).
const (
	singleMark = "\n--@single\n" // prelude: the constants above, one decision's arguments below
	decideMark = "\n--@decide\n" // algorithm: helpers above, the body below
	bodyMark   = "\n--@body\n"   // multi: where the body goes
)

// newScript assembles an algorithm's script from the prelude and its file (see
// lua/prelude.lua) and, if batched, the batched variant from lua/multi.lua, so that each
// algorithm's logic lives in its file alone; the snippets its lines call are spliced in.
func newScript(name, file string, batched, extra bool) *script {
	consts, single, ok := strings.Cut(preludeLua, singleMark)
	if !ok { // the markers are the embedded files' own (scripts_test.go checks them)
		consts, single, batched = "", preludeLua, false
	}
	helpers, body, ok := strings.Cut(file, decideMark)
	if !ok {
		helpers, body = "", file
	}
	sc := &script{name: name, extra: extra}
	sc.src, sc.sha = source(splice(consts+"\n"+helpers+"\n"+single+"\n"+body, snippets))
	if batched {
		if head, tail, ok := strings.Cut(multiLua, bodyMark); ok {
			m := &script{name: name + "/multi", extra: extra}
			m.src, m.sha = source(splice(consts+"\n"+helpers+"\n"+head+"\n"+body+"\n"+tail, snippets))
			sc.multi = m
		}
	}
	if head, tail, ok := strings.Cut(reserveLua, bodyMark); ok && consts != "" {
		if mid, tail, ok := strings.Cut(tail, singleMark); ok {
			r := &script{name: name + "/reserve", extra: extra}
			r.src, r.sha = source(splice(consts+"\n"+helpers+"\n"+head+"\n"+body+"\n"+mid+"\n"+single+"\n"+tail, snippets))
			sc.reserve = r
		}
	}
	return sc
}

func source(src string) (string, string) {
	sum := sha1.Sum([]byte(src))
	return src, hex.EncodeToString(sum[:])
}

var (
	fixedWindowScript   = newScript("fixed_window", fixedWindowLua, true, false)
	slidingLogScript    = newScript("sliding_log", slidingLogLua, false, false)
	slidingWindowScript = newScript("sliding_window", muldivFunc+"\n"+slidingWindowLua, true, true)
	bucketScript        = newScript("bucket", muldivFunc+"\n"+bucketLua, true, false)
	gcraScript          = newScript("gcra", gcraLua, true, false)
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

// windowFormats[w] is the struct format of a sliding window's state with w sub-windows, passed
// to the script as ARGV[2] so that it builds no string (see lua/sliding_window.lua).
var windowFormats = func() []string {
	f := make([]string, sluice.MaxSubWindows+1)
	for w := range f {
		f[w] = "<Bdddd" + strings.Repeat("d", w+1)
	}
	return f
}()

// satMul returns a*b for a, b >= 0, saturating at math.MaxInt64.
func satMul(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}
