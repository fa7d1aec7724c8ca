package simulate

import (
	"context"
	"strings"
	"testing"
)

// TestRegionsScenario (issue 37): over the regions scenario, escrow never admits past the
// limit in any window, before, during or after the partition, and the region cut off admits
// nothing once its epochs have run out; async stays within its stated bound (the other
// regions' rates over the delay and two intervals); per-region limits and write-everywhere
// overshoot; every mode is measured for needless denials.
func TestRegionsScenario(t *testing.T) {
	res, err := RunRegions(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := WriteRegions(&out, res); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	rows := map[string]RegionsRow{}
	for _, r := range res.Rows {
		rows[r.Mode] = r
	}
	if e := rows["escrow"]; e.MaxOver != 0 || e.CutAdmitted != 0 {
		t.Errorf("escrow: %d past the limit in a window, %d admitted by the region cut off after its epochs", e.MaxOver, e.CutAdmitted)
	}
	if p := rows["per_region"]; p.MaxOver == 0 {
		t.Errorf("per-region limits never overshot: the scenario does not test what it should")
	}
	if rows["escrow"].Admitted < rows["per_region"].Admitted/3 {
		t.Errorf("escrow admitted %d, too little to tell", rows["escrow"].Admitted)
	}
	for w, n := range res.Admitted["escrow"] {
		if n > res.Limit {
			t.Errorf("escrow: window %d admitted %d", w, n)
		}
	}
	// Async's bound per window, outside the cut: the limit plus, for the region that admits
	// last, the other regions' admissions it had not seen: their rate over two intervals and
	// the delay to them. Across the cut, each side admits up to the limit less what it last
	// saw of the other: at most the limit more.
	bound := asyncRegionsBound()
	for w, n := range res.Admitted["async"] {
		start, end := res.Windows[w], res.Windows[w]+regionsPeriod
		limit := res.Limit + bound
		if end > res.Cut[0] && start < res.Cut[1]+regionsPeriod {
			limit = 2 * res.Limit
		}
		if n > limit {
			t.Errorf("async: window at %v admitted %d, bound %d", start, n, limit)
		}
	}
	t.Logf("async bound outside the cut: limit + %d per window", bound)
}

// asyncRegionsBound is the most async may admit past the limit in a window outside a cut:
// the largest, over the regions, of the other regions' highest rates of the scenario over two
// intervals and the delay to them.
func asyncRegionsBound() int64 {
	var peak [3]float64
	for _, p := range regionDemand {
		for r, v := range p.rate {
			peak[r] = max(peak[r], v)
		}
	}
	var most float64
	for i := range regionNames {
		var unseen float64
		for j := range regionNames {
			if j != i {
				unseen += peak[j] * (2*regionsInterval + regionDelay[i][j]).Seconds()
			}
		}
		most = max(most, unseen)
	}
	return int64(most + 1)
}
