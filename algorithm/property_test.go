package algorithm_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// bound is the most units an algorithm may admit in any span of one period (half-open,
// (t-P, t]) for the rule: its documented accuracy bound.
func bound(r sluice.Rule) int64 {
	switch r.Algorithm {
	case sluice.AlgorithmSlidingLog:
		return r.Limit // exact
	case sluice.AlgorithmFixedWindow, sluice.AlgorithmSlidingWindow:
		return 2 * r.Limit // a full window on each side of an edge
	default:
		return r.Capacity() + r.Limit // a full bucket plus one period of refill
	}
}

type admission struct{ at, n int64 }

// maxInWindow returns the most units admitted in any span (t-p, t].
func maxInWindow(adm []admission, p int64) int64 {
	sort.Slice(adm, func(i, j int) bool { return adm[i].at < adm[j].at })
	var best, sum int64
	lo := 0
	for hi := range adm {
		sum += adm[hi].n
		for adm[lo].at <= adm[hi].at-p {
			sum -= adm[lo].n
			lo++
		}
		best = max(best, sum)
	}
	return best
}

// trafficGap draws the next inter-arrival gap: mostly short bursts, sometimes long pauses,
// often exactly on a millisecond edge.
func trafficGap(rng *rand.Rand, p int64) int64 {
	switch rng.IntN(10) {
	case 0:
		return rng.Int64N(2 * p)
	case 1:
		return 0
	case 2:
		return (p / 10) - rng.Int64N(3)
	default:
		return rng.Int64N(max(1, p/20))
	}
}

func randomRule(rng *rand.Rand, a sluice.Algorithm) sluice.Rule {
	periods := []time.Duration{time.Millisecond * 10, 100 * time.Millisecond, time.Second, 7 * time.Second, time.Minute}
	r := sluice.Rule{Algorithm: a, Limit: 1 + rng.Int64N(50), Period: periods[rng.IntN(len(periods))]}
	if a.Bucket() && rng.IntN(2) == 0 {
		r.Burst = 1 + rng.Int64N(80)
	}
	if a == sluice.AlgorithmSlidingWindow {
		for _, n := range []int{1, 2, 4, 5, 10} {
			if rng.IntN(3) == 0 && r.Period%(time.Duration(n)*time.Millisecond) == 0 {
				r.SubWindows = n
			}
		}
	}
	if a == sluice.AlgorithmGCRA && r.Period < time.Duration(r.Limit)*time.Microsecond {
		r.Period = time.Second
	}
	return r
}

// TestPropertyBound drives every algorithm with random traffic and checks that no span of one
// period ever admits more than the algorithm's documented bound, and that every decision is
// internally consistent.
func TestPropertyBound(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			for seed := uint64(0); seed < 200; seed++ {
				rng := rand.New(rand.NewPCG(seed, uint64(a)))
				r := randomRule(rng, a)
				if err := r.Validate(); err != nil {
					t.Fatalf("seed %d: generated an invalid rule %s: %v", seed, r, err)
				}
				s, pr := algorithm.New(a), algorithm.Compile(r)
				p := int64(r.Period)
				now := int64(1_700_000_000_000_000_000)
				var adm []admission
				for i := 0; i < 2000; i++ {
					now += trafficGap(rng, p)
					n := int64(1)
					if rng.IntN(8) == 0 {
						n = rng.Int64N(r.Capacity() + 2)
					}
					d := s.Take(now, &pr, n, 0)
					checkDecision(t, fmt.Sprintf("seed %d step %d %s n=%d", seed, i, r, n), r, n, d)
					if d.Allowed && n > 0 {
						adm = append(adm, admission{now, n})
					}
				}
				if got, b := maxInWindow(adm, p), bound(r); got > b {
					t.Fatalf("seed %d %s: %d admitted in one period, bound %d", seed, r, got, b)
				}
			}
		})
	}
}

func checkDecision(t *testing.T, what string, r sluice.Rule, n int64, d sluice.Decision) {
	t.Helper()
	c := r.Capacity()
	switch {
	case d.Capacity != c:
		t.Fatalf("%s: limit %d, want %d", what, d.Capacity, c)
	case d.Remaining < 0 || d.Remaining > c:
		t.Fatalf("%s: remaining %d outside [0, %d]", what, d.Remaining, c)
	case d.Allowed && d.RetryAfter != 0:
		t.Fatalf("%s: allowed with retry_after %v", what, d.RetryAfter)
	case !d.Allowed && n > c && d.RetryAfter != sluice.Never:
		t.Fatalf("%s: n above capacity but retry_after %v", what, d.RetryAfter)
	case !d.Allowed && n <= c && d.RetryAfter <= 0:
		t.Fatalf("%s: denied with retry_after %v", what, d.RetryAfter)
	case d.ResetAfter < 0 || d.ResetAfter > r.Period*time.Duration(2+c/r.Limit):
		t.Fatalf("%s: reset_after %v out of range", what, d.ResetAfter)
	case d.Delay != 0:
		t.Fatalf("%s: delay %v without a wait", what, d.Delay)
	}
}

// TestPropertyRetryAfter checks that RetryAfter is exact for the exact algorithms: denied
// just before it, allowed at it.
func TestPropertyRetryAfter(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			for seed := uint64(0); seed < 100; seed++ {
				rng := rand.New(rand.NewPCG(seed, 7))
				r := randomRule(rng, a)
				s, p := algorithm.New(a), algorithm.Compile(r)
				now := int64(1_700_000_000_000_000_000) + rng.Int64N(int64(r.Period))
				for i := 0; i < 500; i++ {
					now += trafficGap(rng, int64(r.Period))
					d := s.Take(now, &p, 1, 0)
					if d.Allowed {
						continue
					}
					at := now + int64(d.RetryAfter)
					probe := clone(s, r, now)
					if before := probe.Take(at-1, &p, 1, 0); before.Allowed && d.RetryAfter > 1 {
						t.Fatalf("seed %d %s: allowed 1ns before retry_after %v", seed, r, d.RetryAfter)
					}
					probe = clone(s, r, now)
					if after := probe.Take(at, &p, 1, 0); !after.Allowed {
						t.Fatalf("seed %d %s step %d: denied at retry_after %v: %+v", seed, r, i, d.RetryAfter, after)
					}
				}
			}
		})
	}
}

// clone copies a state by value. States are plain structs with at most one slice.
func clone(s algorithm.State, r sluice.Rule, now int64) algorithm.State {
	switch v := s.(type) {
	case *algorithm.FixedWindow:
		c := *v
		return &c
	case *algorithm.TokenBucket:
		c := *v
		return &c
	case *algorithm.LeakyBucket:
		c := *v
		return &c
	case *algorithm.GCRA:
		c := *v
		return &c
	case *algorithm.SlidingLog, *algorithm.SlidingWindow:
		return v.(interface{ Clone() algorithm.State }).Clone()
	}
	panic("unknown state")
}

// TestPropertyBackwardsClock checks that a clock jumping backwards never creates capacity.
func TestPropertyBackwardsClock(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			for seed := uint64(0); seed < 100; seed++ {
				rng := rand.New(rand.NewPCG(seed, 11))
				r := randomRule(rng, a)
				s, p := algorithm.New(a), algorithm.Compile(r)
				now := int64(1_700_000_000_000_000_000)
				for i := 0; i < 300; i++ {
					now += trafficGap(rng, int64(r.Period))
					s.Take(now, &p, 1, 0)
					before := s.Take(now, &p, 0, 0).Remaining
					back := now - rng.Int64N(3*int64(r.Period))
					if after := s.Take(back, &p, 0, 0).Remaining; after > before {
						t.Fatalf("seed %d %s: clock back %v raised remaining %d -> %d", seed, r, time.Duration(now-back), before, after)
					}
				}
			}
		})
	}
}

// TestPropertyLeakyQueueSpacing checks that the leaky bucket as a queue starts admitted
// requests at most Limit per Period, evenly spaced, and never queues beyond its capacity.
func TestPropertyLeakyQueueSpacing(t *testing.T) {
	for seed := uint64(0); seed < 100; seed++ {
		rng := rand.New(rand.NewPCG(seed, 13))
		r := randomRule(rng, sluice.AlgorithmLeakyBucket)
		s, p := algorithm.New(sluice.AlgorithmLeakyBucket), algorithm.Compile(r)
		now := int64(1_700_000_000_000_000_000)
		var starts []admission
		for i := 0; i < 1000; i++ {
			now += trafficGap(rng, int64(r.Period))
			d := s.Take(now, &p, 1, int64(r.Period)*4)
			if !d.Allowed {
				continue
			}
			starts = append(starts, admission{now + int64(d.Delay), 1})
			if d.Delay > time.Duration(r.Capacity())*r.Period/time.Duration(r.Limit)+1 {
				t.Fatalf("seed %d %s: queued for %v, beyond the queue's capacity", seed, r, d.Delay)
			}
		}
		if got := maxInWindow(starts, int64(r.Period)); got > r.Limit+1 {
			t.Fatalf("seed %d %s: %d requests started in one period, want at most %d", seed, r, got, r.Limit+1)
		}
	}
}

// TestBucketsAgree checks the documented equivalence: token bucket, leaky bucket (meter) and
// GCRA admit the same requests when Limit divides Period.
func TestBucketsAgree(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 17))
		r := sluice.TokenBucket(1+rng.Int64N(20), time.Second, rng.Int64N(40))
		r.Period = time.Duration(r.Limit) * 50 * time.Millisecond
		tb, lb, gc := algorithm.New(sluice.AlgorithmTokenBucket), algorithm.New(sluice.AlgorithmLeakyBucket), algorithm.New(sluice.AlgorithmGCRA)
		pt, pl, pg := algorithm.Compile(r), algorithm.Compile(r.WithAlgorithm(sluice.AlgorithmLeakyBucket)), algorithm.Compile(r.WithAlgorithm(sluice.AlgorithmGCRA))
		now := int64(1_700_000_000_000_000_000)
		for i := 0; i < 1000; i++ {
			now += trafficGap(rng, int64(r.Period))
			n := 1 + rng.Int64N(3)
			a := tb.Take(now, &pt, n, 0)
			b := lb.Take(now, &pl, n, 0)
			c := gc.Take(now, &pg, n, 0)
			if a != b || a.Allowed != c.Allowed || a.Remaining != c.Remaining {
				t.Fatalf("seed %d step %d %s n=%d:\n token %+v\n leaky %+v\n gcra  %+v", seed, i, r, n, a, b, c)
			}
		}
	}
}
