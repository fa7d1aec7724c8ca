package simulate

import (
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/quota/alloc"
)

// The quota scale-up scenario: clients join a quota bucket one after another, as new pods of
// a fleet do, while the earlier ones hold the whole limit; every client reports each
// interval of virtual time, and the server (package quota/alloc, as the RLQS server runs it)
// pushes the changed shares to the clients, a shrink's share handed out once it is
// delivered.
const (
	QuotaScaleUpScenario   = "quota_scale_up"
	QuotaScaleUpSummary    = "clients join a quota bucket one by one while the others hold the whole limit"
	QuotaScaleUpDefinition = "limit 1000/s, reports every 200 ms, 8 clients of demands 800, 500, 300, 200, 150, 100, 60, 40 per second joining every 10 reports; assignment TTL 1 s and 30 s; one server (every assignment delivered at once) and two replicas (clients alternate; an assignment for the other replica's client travels 2 ms by pub/sub, and its delivery is confirmed there); a report's answer waits for the share the shrinks free (up to 250 ms)"
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
	DenyAll             int // zero shares answered while the client's fair share was positive
	TTL                 time.Duration
	Replicas            int
}

var scaleUpDemands = []float64{800, 500, 300, 200, 150, 100, 60, 40}

// scaleUpDelivery is the assignments in flight of the scale-up scenario: each reaches its
// client at its instant, and the client's replica then confirms its delivery to the bucket.
type scaleUpDelivery struct {
	at     int64
	client int
	push   alloc.Push
}

// QuotaScaleUp runs the scenario with the given TTL and number of replicas (1 or 2) and
// returns one row per join.
func QuotaScaleUp(ttl time.Duration, replicas int) []ScaleUpJoin {
	const limit, interval, every = 1000, 200 * time.Millisecond, 10
	const pubsub, answerWait = int64(2 * time.Millisecond), int64(250 * time.Millisecond)
	s := &alloc.Settings{Limit: limit, Period: time.Second, TTL: ttl}
	var b alloc.Bucket
	n := len(scaleUpDemands)
	held := make([]alloc.Assignment, n) // what each client holds: its newest assignment received
	id := func(i int) string { return fmt.Sprint("c", i) }
	index := func(c string) int {
		var k int
		_, _ = fmt.Sscanf(c, "c%d", &k)
		return k
	}
	everyone := func(string) bool { return true }
	var flight []scaleUpDelivery
	// send puts the assignments made on replica from in flight: at once to its own clients,
	// through pub/sub to the other replica's.
	send := func(now int64, from int, pushes []alloc.Push) {
		for _, p := range pushes {
			k, at := index(p.Client), now
			if k%replicas != from {
				at += pubsub
			}
			flight = append(flight, scaleUpDelivery{at, k, p})
		}
	}
	var rows []ScaleUpJoin
	var row *ScaleUpJoin
	sum := func(now int64) int64 {
		var total int64
		for _, a := range held {
			if a.Expires > now {
				total += a.Share
			}
		}
		return total
	}
	// deliver delivers what is in flight until instant until, in order of arrival.
	deliver := func(until int64) {
		for {
			sort.SliceStable(flight, func(i, j int) bool { return flight[i].at < flight[j].at })
			if len(flight) == 0 || flight[0].at > until {
				return
			}
			d := flight[0]
			flight = flight[1:]
			if d.push.Expires > held[d.client].Expires {
				held[d.client] = d.push.Assignment
			}
			if d.push.Pending {
				send(d.at, d.client%replicas, b.Delivered(s, d.push.Client, d.push.Assignment, d.at, everyone, nil))
			}
			if over := sum(d.at) - limit; over > 0 {
				row.Overcommit = max(row.Overcommit, over)
			}
		}
	}
	now := int64(0)
	for joined := 1; joined <= n; joined++ {
		fair := make([]int64, joined)
		alloc.MaxMinFair(limit, scaleUpDemands[:joined], fair)
		rows = append(rows, ScaleUpJoin{Client: joined - 1, FirstShare: -1, Fair: -1, TTL: ttl, Replicas: replicas})
		row = &rows[len(rows)-1]
		for round := 0; round < every; round++ {
			overcommitted := false
			for i := 0; i < joined; i++ {
				el := interval
				if i == joined-1 && round == 0 {
					el = 0 // a newcomer's first report has no elapsed time
				}
				a, pushes := b.ReportPush(s, id(i), sluice.Critical, now, scaleUpDemands[i]*el.Seconds(), el, everyone, nil)
				waits := false // short of its share while shrinks are in flight (rlqs Handed.Waits)
				for _, p := range pushes {
					waits = waits || (p.Pending && b.Lacks(id(i)) > 0)
				}
				answer := held[i].Expires
				send(now, i%replicas, append([]alloc.Push{{Client: id(i), Assignment: a, Pending: b.Pending(id(i), now)}}, pushes...))
				deliver(now)
				// The answer waits for the share the shrinks free (rlqs.Config.AnswerWait):
				// until a newer assignment than its own reaches the reporter.
				answer = max(answer, a.Expires)
				for waits && len(flight) > 0 && flight[0].at <= now+answerWait && held[i].Expires <= answer {
					deliver(flight[0].at)
				}
				if held[i].Share == 0 && fair[i] > 0 {
					row.DenyAll++
				}
				overcommitted = overcommitted || sum(now) > limit
			}
			deliver(now + int64(interval) - 1)
			settled := true
			for k := 0; k < joined; k++ {
				if math.Abs(float64(held[k].Share-fair[k])) > math.Max(5, 0.05*float64(fair[k])) {
					settled = false
				}
			}
			if overcommitted {
				row.OvercommitIntervals++
			}
			if row.FirstShare < 0 && held[joined-1].Share > 0 {
				row.FirstShare = round + 1
			}
			if row.Fair < 0 && settled {
				row.Fair = round + 1
			} else if !settled {
				row.Fair = -1
			}
			now += int64(interval)
		}
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
