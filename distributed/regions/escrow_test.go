package regions

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// TestAllocateNeverOverlaps (issue 37) allocates epoch after epoch with random targets,
// regions that come and go, gaps (epochs nobody allocated) and histories compacted to
// maxChanges, and checks the escrow invariant on the shares really handed out: for every
// epoch e, the regions' largest shares over [e-cool, e] sum to at most Parts. With steady
// targets, every region holds its target within cool+1 epochs; for a store that forgets on
// a lowered limit, within 10% of it (or 0.1% of the limit) after 4 cool + 4, since what it
// regrew past what it remembers counts until it is out of the store's memory.
func TestAllocateNeverOverlaps(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 37))
		cool := int64(r.IntN(8))
		h := &history{epoch: int64(time.Second)}
		names := []string{"a", "b", "c", "d"}[:2+r.IntN(3)]
		for _, n := range names {
			h.index(n, true)
		}
		truth := map[int64][]int64{} // epoch -> parts handed out
		m := int64(r.IntN(1000))
		steady := []int64(nil)
		forget := r.IntN(2) == 0
		settle := int(cool) + 1 // epochs to reach steady targets
		if forget {
			settle = 4*int(cool) + 4 // what a forgetting store regrows past what it remembers counts until it is out of its memory
		}
		for step := 0; step < 320; step++ {
			target := make([]int64, len(names))
			switch {
			case step >= 250 && steady != nil:
				target = steady
			default:
				left := int64(Parts)
				for i := range target {
					if r.IntN(4) == 0 {
						continue // not live
					}
					target[i] = int64(r.IntN(int(left + 1)))
					left -= target[i]
				}
				if step == 249 {
					steady = target
				}
			}
			if r.IntN(10) == 0 && step < 250 {
				m += int64(1 + r.IntN(int(cool)+3)) // a gap
			}
			parts := h.allocate(m, cool, target, forget)
			h.record(m, parts, m-cool-1)
			truth[m] = parts
			for e := m - cool; e <= m; e++ {
				var sum int64
				for i := range names {
					var most int64
					for x := e - cool; x <= e; x++ {
						if p, ok := truth[x]; ok {
							most = max(most, p[i])
						}
					}
					sum += most
				}
				if sum > Parts {
					t.Fatalf("seed %d step %d: epoch %d: the largest shares over the %d epochs before sum to %d > %d", seed, step, e, cool, sum, Parts)
				}
			}
			for i := range names {
				if got, want := h.share(i, m), parts[i]; got != want {
					t.Fatalf("seed %d: share(%d, %d) = %d, allocated %d", seed, i, m, got, want)
				}
			}
			if step >= 250+settle {
				for i := range parts {
					if parts[i] > steady[i] || parts[i] < steady[i] && (!forget || parts[i] < steady[i]*9/10-Parts/1000) {
						t.Fatalf("seed %d step %d (forgets %v): steady targets %v, allocated %v after %d epochs", seed, step, forget, steady, parts, step-250)
					}
				}
			}
			m++
		}
		// The history survives its encoding.
		got, err := decodeHistory(h.encode(nil))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(h) {
			t.Fatalf("round trip: %v %v, want %v", got, err, h)
		}
	}
}

// TestEscrowNeverOverTheRule (issue 37) runs the regions' decisions through the real
// algorithms: each region decides on its own memory store under the rule scaled to its
// share of each epoch, while the shares move with random demand (the allocation of
// TestAllocateNeverOverlaps, one epoch ahead, cool covering the rule's memory), and checks
// the whole fleet's admissions against what the rule promises for one store: at most the
// limit in every aligned window (fixed window), every window of a period (sliding log),
// every run of N sub-windows (sliding window), and at most burst + limit × t / period in
// any span t (token bucket, GCRA, leaky bucket).
func TestEscrowNeverOverTheRule(t *testing.T) {
	const epoch = 100 * time.Millisecond
	rules := []sluice.Rule{
		sluice.FixedWindow(100, time.Second),
		sluice.SlidingLog(100, time.Second),
		sluice.SlidingWindow(100, time.Second, 4),
		sluice.SlidingWindow(100, time.Second, 0),
		sluice.TokenBucket(100, time.Second, 150),
		sluice.TokenBucket(100, time.Second, 40),
		sluice.GCRA(100, time.Second, 120),
		sluice.LeakyBucket(100, time.Second, 100),
	}
	for _, rule := range rules {
		for seed := uint64(0); seed < 4; seed++ {
			t.Run(fmt.Sprintf("%v/%d", rule, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 7))
				clock := sluicetest.NewManualClock(time.Unix(1e9, 0))
				names := []string{"a", "b", "c"}
				stores := make([]*memory.Store, len(names))
				for i := range stores {
					s, err := memory.New(memory.WithClock(clock), memory.WithCoarseClock(false))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = s.Close() })
					stores[i] = s
				}
				h := &history{epoch: int64(epoch)}
				for _, n := range names {
					h.index(n, true)
				}
				cool := (ruleMemory(rule) + int64(epoch) - 1) / int64(epoch)
				var admitted []int64 // instants, ns
				demand := []float64{300, 20, 20}
				start := clock.Now().UnixNano()
				e0 := start / int64(epoch)
				for e := e0; e < e0+100; e++ {
					if r.IntN(8) == 0 { // the demand moves
						for i := range demand {
							demand[i] = float64(r.IntN(300))
						}
					}
					d := map[string]float64{}
					for i, n := range names {
						d[n] = demand[i]
					}
					h.record(e, h.allocate(e, cool, h.targets(rule.Limit, d, func(string) bool { return true }), forgets(rule)), e-cool-1)
					for step := 0; step < 20; step++ { // 20 steps of 5 ms per epoch
						for i := range names {
							if r.Float64() > demand[i]/float64(rule.Limit)*2 {
								continue
							}
							scaled, ok := scale(rule, h.share(i, e))
							if !ok {
								continue
							}
							dec, err := stores[i].Take(context.Background(), sluice.Request{Key: "k", Rule: scaled, N: 1})
							if err != nil {
								t.Fatal(err)
							}
							if dec.Allowed {
								admitted = append(admitted, clock.Now().UnixNano())
							}
						}
						clock.Advance(5 * time.Millisecond)
					}
				}
				checkRule(t, rule, admitted)
				if len(admitted) < 100 {
					t.Fatalf("only %d admitted: the test admits too little to tell", len(admitted))
				}
			})
		}
	}
}

// checkRule fails t when the admissions (sorted instants) exceed what rule allows one store.
func checkRule(t *testing.T, rule sluice.Rule, at []int64) {
	t.Helper()
	p := int64(rule.Period)
	count := func(from, to int64) int64 { // admissions in [from, to)
		i, _ := slices.BinarySearch(at, from)
		j, _ := slices.BinarySearch(at, to)
		return int64(j - i)
	}
	switch rule.Algorithm {
	case sluice.AlgorithmFixedWindow:
		for _, x := range at {
			w := x / p * p
			if n := count(w, w+p); n > rule.Limit {
				t.Fatalf("%d admitted in the window at %d, limit %d", n, w, rule.Limit)
			}
		}
	case sluice.AlgorithmSlidingLog:
		for _, x := range at {
			if n := count(x, x+p); n > rule.Limit {
				t.Fatalf("%d admitted in the period from %d, limit %d", n, x, rule.Limit)
			}
		}
	case sluice.AlgorithmSlidingWindow:
		sub := p / rule.Windows()
		for _, x := range at {
			w := x / sub * sub
			if n := count(w-p+sub, w+sub); n > rule.Limit {
				t.Fatalf("%d admitted in the %d sub-windows to %d, limit %d", n, rule.Windows(), w, rule.Limit)
			}
		}
	default:
		for i := range at {
			for j := i; j < len(at); j++ {
				span := at[j] - at[i]
				allowed := float64(rule.Capacity()) + float64(rule.Limit)*float64(span)/float64(p)
				if n := float64(j - i + 1); n > allowed+1e-9 {
					t.Fatalf("%v admitted in %v, at most %.1f", n, time.Duration(span), allowed)
				}
			}
		}
	}
}
