package algorithm_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/store/storetest"
)

// extremeRule draws a rule from the edges the service accepts: limits from 1 to
// sluice.MaxLimit, periods from a millisecond to sluice.MaxPeriod.
func extremeRule(rng *rand.Rand, a sluice.Algorithm) sluice.Rule {
	limits := []int64{1, 10, 1000, sluice.MaxLimit}
	periods := []time.Duration{time.Second, time.Hour, 8784 * time.Hour, sluice.MaxPeriod}
	for {
		r := sluice.Rule{Algorithm: a, Limit: limits[rng.IntN(len(limits))], Period: periods[rng.IntN(len(periods))]}
		if a == sluice.AlgorithmSlidingLog {
			r.Limit = min(r.Limit, 1000) // a log of sluice.MaxSlidingLogLimit entries is slow to copy; it multiplies nothing
		}
		if a.Bucket() && rng.IntN(2) == 0 {
			r.Burst = limits[rng.IntN(len(limits))]
		}
		if r.Validate() == nil {
			return r
		}
	}
}

// extremeN draws a settle amount, refunds and charges alike, up to the int64 edges.
func extremeN(rng *rand.Rand, r sluice.Rule) int64 {
	ns := []int64{1, r.Limit, 10_000, sluice.MaxLimit, math.MaxInt64 / 2, math.MaxInt64}
	n := ns[rng.IntN(len(ns))]
	if rng.IntN(2) == 0 {
		return -n
	}
	return n
}

// waitFor returns how long a take of one unit would wait on a copy of st at now (0 when it
// would be admitted), leaving st as it is.
func waitFor(t *testing.T, st algorithm.State, now int64, p *algorithm.Params, r sluice.Rule) time.Duration {
	t.Helper()
	cp, err := algorithm.DecodeState(algorithm.AppendState(nil, st))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := algorithm.Apply(cp, now, p, &sluice.Request{Key: "k", Rule: r, N: 1})
	if d.Allowed {
		return 0
	}
	return d.RetryAfter
}

// TestPropertySettleSaturates checks, for every algorithm on rules up to the service's limits
// and settles up to the int64 edges, that a refund never lengthens the wait of the next
// request, and that no settle makes a key wait longer than its largest debt takes to pay:
// extreme amounts saturate instead of wrapping (a GCRA refund of 10,000 on a yearly rule once
// wrapped its arrival time into a 166-year lock-out).
func TestPropertySettleSaturates(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			for seed := uint64(0); seed < 300; seed++ {
				rng := rand.New(rand.NewPCG(seed, uint64(a)+7))
				r := extremeRule(rng, a)
				p := algorithm.Compile(r)
				st := algorithm.New(a)
				now := int64(1_700_000_000) * int64(time.Second)
				// Longest a key may have to wait: its whole debt and one full capacity paid back
				// at the rule's rate, plus a period for the window algorithms' edges.
				perUnit := float64(r.Period) / float64(r.Limit)
				bound := time.Duration(math.MaxInt64)
				if f := float64(r.Capacity()+algorithm.MaxDebt(r)+1)*perUnit + 2*float64(r.Period); f < 9e18 {
					bound = time.Duration(f)
				}
				for step := range 8 {
					now += rng.Int64N(int64(r.Period) / 4)
					n := extremeN(rng, r)
					before := waitFor(t, st, now, &p, r)
					d, _ := algorithm.Apply(st, now, &p, &sluice.Request{Key: "k", Rule: r, N: n, Settle: true})
					after := waitFor(t, st, now, &p, r)
					switch {
					case d.RetryAfter < 0 || d.ResetAfter < 0:
						t.Fatalf("seed %d step %d: %s settle %d: negative times %+v", seed, step, r, n, d)
					case n < 0 && after > before:
						t.Fatalf("seed %d step %d: %s refund %d lengthened the wait from %v to %v", seed, step, r, -n, before, after)
					case after > bound || d.RetryAfter > bound:
						t.Fatalf("seed %d step %d: %s settle %d: wait %v (decision %v), past the debt's bound %v", seed, step, r, n, after, d.RetryAfter, bound)
					}
				}
			}
		})
	}
}

// TestPropertyDebtPaidWithinPeriod (issue 31, item 6) checks, for every algorithm on rules up
// to the service's limits and any sequence of takes and settles up to the int64 edges, that a
// debt is paid within one period of the rule (the sliding window's within Period +
// Period/SubWindows, when its estimate slides the newest sub-window out), and that the key is
// back to full within that plus the time its capacity takes to refill: a key's state, which
// the shared stores keep for its ResetAfter, never outlives its rule's bounds because of a
// settle. Before the fix a settle on a daily bucket rule set a debt of 366 days.
func TestPropertyDebtPaidWithinPeriod(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			for seed := uint64(0); seed < 300; seed++ {
				rng := rand.New(rand.NewPCG(seed, uint64(a)+31))
				r := extremeRule(rng, a)
				if a == sluice.AlgorithmSlidingWindow && rng.IntN(2) == 0 && r.Period%(60*time.Millisecond) == 0 {
					r.SubWindows = 60
				}
				p := algorithm.Compile(r)
				st := algorithm.New(a)
				now := int64(1_700_000_000) * int64(time.Second)
				debt, full := storetest.DebtBounds(r)
				for step := range 8 {
					now += rng.Int64N(int64(r.Period) / 4)
					req := sluice.Request{Key: "k", Rule: r, N: extremeN(rng, r), Settle: true}
					if rng.IntN(3) == 0 {
						req = sluice.Request{Key: "k", Rule: r, N: 1 + rng.Int64N(r.Capacity())}
					}
					d, _ := algorithm.Apply(st, now, &p, &req)
					peek, _ := algorithm.Apply(st, now, &p, &sluice.Request{Key: "k", Rule: r})
					// 1 ms of slack: the stores' clocks and windows are in whole milliseconds,
					// and the buckets' rates round up to the next nanosecond per unit.
					slack := time.Millisecond + time.Duration(r.Capacity()+r.Limit)
					switch {
					case req.Settle && d.RetryAfter > debt+slack, peek.RetryAfter > debt+slack:
						t.Fatalf("seed %d step %d: %s after %+v: debt paid in %v (settle %v), want within %v", seed, step, r, req, peek.RetryAfter, d.RetryAfter, debt)
					case peek.ResetAfter > full+slack:
						t.Fatalf("seed %d step %d: %s after %+v: back to full in %v, want within %v", seed, step, r, req, peek.ResetAfter, full)
					}
				}
			}
		})
	}
}
