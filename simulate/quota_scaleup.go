package simulate

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/quota/alloc"
)

// The quota scale-up scenario: clients join a quota bucket one after another, as new pods of
// a fleet do, while the earlier ones hold the whole limit; every client reports each
// interval of virtual time, and the server (package quota/alloc, as the RLQS server runs it)
// pushes the changed shares to the clients it serves.
const (
	QuotaScaleUpScenario   = "quota_scale_up"
	QuotaScaleUpSummary    = "clients join a quota bucket one by one while the others hold the whole limit"
	QuotaScaleUpDefinition = "limit 1000/s, reports every 200 ms, 8 clients of demands 800, 500, 300, 200, 150, 100, 60, 40 per second joining every 10 reports; assignment TTL 1 s and 30 s; one server (every client pushed at once) and two replicas (clients alternate; a replica pushes to its own, the others learn at their next report)"
)

// ScaleUpJoin is what one join looked like: reports (intervals) until the newcomer held a
// non-zero share and until every client held its max-min fair share (within 5%, or 5
// requests), and the largest sum of held shares above the limit, with how many reports it
// lasted.
type ScaleUpJoin struct {
	Client              int
	FirstShare, Fair    int // intervals after the join; -1: never within the phase
	Overcommit          int64
	OvercommitIntervals int
	DenyAll             int // zero shares handed while the client's fair share was positive
	TTL                 time.Duration
	Replicas            int
}

var scaleUpDemands = []float64{800, 500, 300, 200, 150, 100, 60, 40}

// QuotaScaleUp runs the scenario with the given TTL and number of replicas (1 or 2) and
// returns one row per join.
func QuotaScaleUp(ttl time.Duration, replicas int) []ScaleUpJoin {
	const limit, interval, every = 1000, 200 * time.Millisecond, 10
	s := &alloc.Settings{Limit: limit, Period: time.Second, TTL: ttl}
	var b alloc.Bucket
	n := len(scaleUpDemands)
	held := make([]int64, n)    // what each client holds (its latest assignment received)
	expires := make([]int64, n) // and until when
	id := func(i int) string { return fmt.Sprint("c", i) }
	replicaOf := func(i int) int { return i % replicas }
	var rows []ScaleUpJoin
	now := int64(0)
	for joined := 1; joined <= n; joined++ {
		fair := make([]int64, joined)
		alloc.MaxMinFair(limit, scaleUpDemands[:joined], fair)
		row := ScaleUpJoin{Client: joined - 1, FirstShare: -1, Fair: -1, TTL: ttl, Replicas: replicas}
		for round := 0; round < every; round++ {
			for i := 0; i < joined; i++ {
				r := replicaOf(i)
				local := func(c string) bool {
					var k int
					_, err := fmt.Sscanf(c, "c%d", &k)
					return err == nil && replicaOf(k) == r
				}
				el := interval
				if i == joined-1 && round == 0 {
					el = 0 // a newcomer's first report has no elapsed time
				}
				a, pushes := b.ReportPush(s, id(i), sluice.Critical, now, scaleUpDemands[i]*el.Seconds(), el, local, nil)
				held[i], expires[i] = a.Share, a.Expires
				for _, p := range pushes {
					var k int
					if _, err := fmt.Sscanf(p.Client, "c%d", &k); err == nil {
						held[k], expires[k] = p.Share, p.Expires
					}
				}
				if a.Share == 0 && fair[i] > 0 {
					row.DenyAll++
				}
				var sum int64
				for k := 0; k < joined; k++ {
					if expires[k] > now {
						sum += held[k]
					}
				}
				if over := sum - limit; over > 0 {
					row.Overcommit = max(row.Overcommit, over)
				}
			}
			var sum int64
			settled := true
			for k := 0; k < joined; k++ {
				sum += held[k]
				if math.Abs(float64(held[k]-fair[k])) > math.Max(5, 0.05*float64(fair[k])) {
					settled = false
				}
			}
			if sum > limit {
				row.OvercommitIntervals++
			}
			if row.FirstShare < 0 && held[joined-1] > 0 {
				row.FirstShare = round + 1
			}
			if row.Fair < 0 && settled {
				row.Fair = round + 1
			} else if !settled {
				row.Fair = -1
			}
			now += int64(interval)
		}
		rows = append(rows, row)
	}
	return rows
}

// WriteScaleUp writes the rows of QuotaScaleUp as a table.
func WriteScaleUp(w io.Writer, rows []ScaleUpJoin) error {
	if _, err := fmt.Fprintf(w, "%-5s %-8s %-7s %-12s %-11s %-14s %-16s %s\n", "ttl", "replicas", "joiner", "first_share", "max_min_at", "overcommit/s", "overcommit_for", "deny_all"); err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "%-5v %-8d %-7d %-12s %-11s %-14d %-16s %d\n", r.TTL, r.Replicas, r.Client,
			intervals(r.FirstShare), intervals(r.Fair), r.Overcommit, intervals(r.OvercommitIntervals), r.DenyAll); err != nil {
			return err
		}
	}
	return nil
}

func intervals(n int) string {
	if n < 0 {
		return "never"
	}
	return fmt.Sprint(n, " report(s)")
}
