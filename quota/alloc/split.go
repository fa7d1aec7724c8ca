package alloc

import (
	"math"
	"sort"
)

// Fairness says how a bucket's limit is split among its clients (configuration: fairness).
type Fairness uint8

// The splits.
const (
	// MaxMin is max-min fairness (the default): every client gets its demand up to an equal
	// share, what the light clients leave goes to the heavy ones, and what nobody asks for
	// is spread equally as headroom.
	MaxMin Fairness = iota
	// Proportional splits the whole limit in proportion to the demands.
	Proportional
	// Static gives every client the same fixed share, whatever its demand, while the limit
	// lasts.
	Static
)

var policyNames = [...]string{MaxMin: "max_min", Proportional: "proportional", Static: "static"}

// String returns the split's configuration name.
func (p Fairness) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return "unknown"
}

// ParseFairness parses a configuration name: max_min, proportional or static.
func ParseFairness(name string) (Fairness, bool) {
	for p, n := range policyNames {
		if n == name {
			return Fairness(p), true
		}
	}
	return 0, false
}

// MaxMinFair writes into shares the max-min fair split of limit over demands (water
// filling): clients whose demand is below the water level get it, the others share the rest
// equally; when the demands sum to less than limit, the surplus is spread equally. Shares are
// whole units summing to limit exactly (largest remainders get the rounding). Negative or NaN
// demands count as zero. shares must be as long as demands.
func MaxMinFair(limit int64, demands []float64, shares []int64) {
	n := len(demands)
	if n == 0 {
		return
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	d := func(i int) float64 { return clean(demands[i]) }
	sort.SliceStable(order, func(a, b int) bool { return d(order[a]) < d(order[b]) })
	exact := make([]float64, n)
	remaining := float64(max(limit, 0))
	for k, i := range order {
		equal := remaining / float64(n-k)
		if d(i) > equal {
			for _, j := range order[k:] {
				exact[j] = equal
			}
			remaining = 0
			break
		}
		exact[i] = d(i)
		remaining -= d(i)
	}
	if remaining > 0 {
		for i := range exact {
			exact[i] += remaining / float64(n)
		}
	}
	roundShares(limit, exact, shares)
}

// ProportionalSplit writes into shares the split of limit in proportion to demands (equal
// when every demand is zero), in whole units summing to limit.
func ProportionalSplit(limit int64, demands []float64, shares []int64) {
	n := len(demands)
	if n == 0 {
		return
	}
	total := 0.0
	for _, v := range demands {
		total += clean(v)
	}
	exact := make([]float64, n)
	for i, v := range demands {
		if total > 0 {
			exact[i] = float64(max(limit, 0)) * clean(v) / total
		} else {
			exact[i] = float64(max(limit, 0)) / float64(n)
		}
	}
	roundShares(limit, exact, shares)
}

func clean(v float64) float64 {
	if v > 0 && !math.IsInf(v, 1) {
		return v
	}
	if math.IsInf(v, 1) {
		return math.MaxFloat64 / 1e6
	}
	return 0
}

// roundShares floors exact into shares, then gives the units lost to rounding, one each, to
// the largest fractional parts (ties to the lower index) while the sum stays at most limit.
func roundShares(limit int64, exact []float64, shares []int64) {
	var sum int64
	for i, v := range exact {
		shares[i] = int64(math.Floor(v))
		sum += shares[i]
	}
	left := limit - sum
	if left <= 0 {
		return
	}
	order := make([]int, len(exact))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return exact[order[a]]-math.Floor(exact[order[a]]) > exact[order[b]]-math.Floor(exact[order[b]])
	})
	for _, i := range order {
		if left == 0 {
			break
		}
		if exact[i]-math.Floor(exact[i]) > 0 {
			shares[i]++
			left--
		}
	}
}
