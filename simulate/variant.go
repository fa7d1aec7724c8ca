package simulate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Variant is an algorithm with its parameters, named as in the table: the algorithm's name,
// with the sub-window count appended for sliding windows of more than one sub-window
// (sliding_window is the two-window approximation, sliding_window_4 has four sub-windows).
type Variant struct {
	Algorithm  sluice.Algorithm
	SubWindows int
}

// Name returns the variant's table name.
func (v Variant) Name() string {
	if v.Algorithm == sluice.AlgorithmSlidingWindow && v.SubWindows > 1 {
		return fmt.Sprintf("%s_%d", v.Algorithm, v.SubWindows)
	}
	return v.Algorithm.String()
}

// Rule returns the variant's rule for limit units per period (bucket algorithms refill limit per
// period with a burst of limit).
func (v Variant) Rule(limit int64, period time.Duration) sluice.Rule {
	r := sluice.Rule{Algorithm: v.Algorithm, Limit: limit, Period: period}
	if v.Algorithm == sluice.AlgorithmSlidingWindow && v.SubWindows > 1 {
		r.SubWindows = v.SubWindows
	}
	return r
}

// Counting reports whether the algorithm counts units in a window (fixed window, sliding
// window, sliding log), so that its count can be compared with the exact one.
func (v Variant) Counting() bool { return !v.Algorithm.Bucket() }

// DefaultVariants is the Criteo comparison: every algorithm, with the sliding window as the
// two-window approximation and with 4 and 12 sub-windows.
func DefaultVariants() []Variant {
	return []Variant{
		{Algorithm: sluice.AlgorithmFixedWindow},
		{Algorithm: sluice.AlgorithmSlidingWindow},
		{Algorithm: sluice.AlgorithmSlidingWindow, SubWindows: 4},
		{Algorithm: sluice.AlgorithmSlidingWindow, SubWindows: 12},
		{Algorithm: sluice.AlgorithmSlidingLog},
		{Algorithm: sluice.AlgorithmTokenBucket},
		{Algorithm: sluice.AlgorithmLeakyBucket},
		{Algorithm: sluice.AlgorithmGCRA},
	}
}

// ParseVariants parses a comma-separated list of variant names (see Variant.Name); "all" or ""
// is DefaultVariants.
func ParseVariants(list string) ([]Variant, error) {
	if list == "" || list == "all" {
		return DefaultVariants(), nil
	}
	var out []Variant
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		v, err := parseVariant(name)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func parseVariant(name string) (Variant, error) {
	if a, err := sluice.ParseAlgorithm(name); err == nil {
		return Variant{Algorithm: a}, nil
	}
	const sw = "sliding_window_"
	if rest, ok := strings.CutPrefix(name, sw); ok {
		n, err := strconv.Atoi(rest)
		if err == nil && n >= 1 && n <= sluice.MaxSubWindows {
			return Variant{Algorithm: sluice.AlgorithmSlidingWindow, SubWindows: n}, nil
		}
	}
	return Variant{}, fmt.Errorf("simulate: algorithms: unknown %q (want an algorithm name, or sliding_window_N with N sub-windows, 1..%d)", name, sluice.MaxSubWindows)
}
