package simulate

import (
	"strings"
	"testing"
	"time"
)

// TestQuotaScaleUp (issues 22, 37): clients joining a bucket whose limit the others hold get
// a non-zero share at their first report and the fleet the max-min split within 3 reports,
// with a 1 s and a 30 s TTL; never a zero share answered while the fair one is positive;
// the clients never hold more than the limit, on one server or two replicas.
func TestQuotaScaleUp(t *testing.T) {
	var out strings.Builder
	for _, ttl := range []time.Duration{time.Second, 30 * time.Second} {
		for _, replicas := range []int{1, 2} {
			rows := QuotaScaleUp(ttl, replicas)
			if err := WriteScaleUp(&out, rows); err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.FirstShare != 1 || r.Fair < 0 || r.Fair > 3 || r.DenyAll != 0 {
					t.Errorf("ttl %v, %d replica(s), client %d joining: first share after %d reports, max-min after %d, %d zero shares",
						ttl, replicas, r.Client, r.FirstShare, r.Fair, r.DenyAll)
				}
				if r.Overcommit != 0 || r.OvercommitIntervals != 0 {
					t.Errorf("%d replica(s), client %d joining: overcommit %d/s for %d reports, want none", replicas, r.Client, r.Overcommit, r.OvercommitIntervals)
				}
			}
		}
	}
	t.Log("\n" + out.String())
}
