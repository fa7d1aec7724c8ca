package redis

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"math"
	"math/bits"
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
)

// script is one algorithm's Lua source (prelude included) and its SHA1 for EVALSHA.
type script struct {
	name string
	src  string
	sha  string
}

func newScript(name, body string) *script {
	src := preludeLua + body
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

var (
	fixedWindowScript   = newScript("fixed_window", fixedWindowLua)
	slidingLogScript    = newScript("sliding_log", slidingLogLua)
	slidingWindowScript = newScript("sliding_window", slidingWindowLua)
	bucketScript        = newScript("bucket", bucketLua)
	gcraScript          = newScript("gcra", gcraLua)
)

// scriptArgs returns the script deciding req and its ARGV after the clock (ARGV[3:]).
func scriptArgs(req *sluice.Request) (*script, []any) {
	r := req.Rule
	pms := int64(r.Period / time.Millisecond)
	maxDelay := int64(req.MaxDelay)
	switch r.Algorithm {
	case sluice.AlgorithmFixedWindow:
		return fixedWindowScript, []any{req.N, r.Limit, pms}
	case sluice.AlgorithmSlidingLog:
		return slidingLogScript, []any{req.N, r.Limit, pms}
	case sluice.AlgorithmSlidingWindow:
		w := r.Windows()
		return slidingWindowScript, []any{req.N, r.Limit, w, pms / w}
	case sluice.AlgorithmTokenBucket:
		return bucketScript, []any{req.N, maxDelay, r.Limit, pms, r.Capacity(), "0"}
	case sluice.AlgorithmLeakyBucket:
		return bucketScript, []any{req.N, maxDelay, r.Limit, pms, r.Capacity(), "1"}
	default: // sluice.AlgorithmGCRA; Validate rejected the rest
		t := algorithm.Interval(r)
		return gcraScript, []any{req.N, maxDelay, t, satMul(r.Capacity(), t), r.Capacity()}
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
