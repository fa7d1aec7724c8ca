package simulate_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/simulate"
)

// At 2x overload the classes are shed lowest first on every algorithm, and CRITICAL_PLUS keeps
// (nearly) all it asks for: its demand, 20/s, is within the reserve above the others' shares.
func TestCriticalityShedsLowestFirst(t *testing.T) {
	rows, err := simulate.RunCriticality(context.Background(), sluice.Algorithms(), 2, 10*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	frac := map[sluice.Algorithm]map[sluice.Criticality]float64{}
	for _, r := range rows {
		if frac[r.Algorithm] == nil {
			frac[r.Algorithm] = map[sluice.Criticality]float64{}
		}
		frac[r.Algorithm][r.Class] = float64(r.Admitted) / float64(r.Offered)
	}
	for a, f := range frac {
		if !(f[sluice.Sheddable] <= f[sluice.SheddablePlus] && f[sluice.SheddablePlus] <= f[sluice.Critical] &&
			f[sluice.Critical] <= f[sluice.CriticalPlus]) || f[sluice.CriticalPlus] < 0.98 || f[sluice.Sheddable] > 0.5 {
			t.Errorf("%v: admitted fractions %v", a, f)
		}
	}
}
