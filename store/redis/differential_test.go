package redis_test

import (
	"context"
	"math/bits"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/redis"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestDifferential drives the Redis store and the memory store (the reference) with the same
// random requests at whole-millisecond instants of one manual clock, and wants the same
// decisions: the Lua scripts mirror package algorithm exactly.
func TestDifferential(t *testing.T) {
	differential(t, sluice.Algorithms(), false)
}

// differential is TestDifferential for algorithms algs; with counters, on the windows kept in
// counters and decided without Lua (WithCounters), with the clock only moving forward and
// rule changes that keep a rule's period and sub-windows, where counters differ by design
// (plain.go).
func differential(t *testing.T, algs []sluice.Algorithm, counters bool) {
	c := standalone(t)
	rng := storetest.Rand(t, 1)
	keys := 60
	steps := 120
	if testing.Short() {
		keys, steps = 12, 60
	}
	for _, a := range algs {
		t.Run(a.String(), func(t *testing.T) {
			clock := sluicetest.NewManualClock(t0)
			opts := []redis.Option{redis.WithClock(clock)}
			if counters {
				opts = append(opts, redis.WithCounters())
			}
			rs := newStore(t, c, opts...)
			ms, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < keys; k++ {
				clock.Set(t0.Add(time.Duration(rng.Int64N(1000)) * time.Millisecond))
				key := "k" + string(rune('a'+k%26)) + "{" + string(rune('0'+k/26)) + "}"
				r := storetest.RandomRule(rng, a)
				diff := storetest.Differential{Ref: ms, Store: rs, Same: sameDecisions()}
				for i := 0; i < steps; i++ {
					if rng.IntN(40) == 0 {
						n := storetest.RandomRule(rng, a) // a rule change keeps the state where it can
						if counters {
							n.Period, n.SubWindows = r.Period, r.SubWindows
						}
						if n.Validate() == nil {
							r = n
						}
					}
					step := storetest.RandomStep(rng, r)
					if counters {
						step = max(0, step)
					}
					clock.Advance(step)
					diff.Step(t, clock.Now().Sub(t0), storetest.RandomRequest(rng, key, r))
				}
			}
		})
	}
}

// TestDifferentialBudget is TestDifferential for budget steps (lua/budget.lua against
// algorithm.Ledger), mixed with a plain request one step in four on the same keys. The clock
// only moves forward: a budget key's reservations keep its entry in the memory store, and with
// it a state that a peek brought to its window (an empty fixed or sliding window knows where
// its window ends), which the scripts, like every store, do not write while it holds nothing;
// a clock stepping back into an earlier window then decides from the kept window's end in
// memory and from a new window in Redis (neither admits more).
func TestDifferentialBudget(t *testing.T) {
	c := standalone(t)
	rng := storetest.Rand(t, 2)
	keys, steps := 40, 150
	if testing.Short() {
		keys, steps = 10, 60
	}
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			clock := sluicetest.NewManualClock(t0)
			rs := newStore(t, c, redis.WithClock(clock))
			ms, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < keys; k++ {
				clock.Set(t0.Add(time.Duration(rng.Int64N(1000)) * time.Millisecond))
				key := "b" + string(rune('a'+k%26)) + "{" + string(rune('0'+k/26)) + "}"
				r := storetest.RandomRule(rng, a)
				diff := storetest.Differential{Ref: ms, Store: rs, Same: sameDecisions()}
				var gen storetest.BudgetSteps
				for i := 0; i < steps; i++ {
					clock.Advance(max(0, storetest.RandomStep(rng, r)))
					req := gen.Next(rng, key, r)
					if rng.IntN(4) == 0 {
						req = storetest.RandomRequest(rng, key, r)
					}
					diff.Step(t, clock.Now().Sub(t0), req)
				}
			}
		})
	}
}

// TestAlgorithmSwitch: a key decided under another algorithm starts from full, as in memory.
func TestAlgorithmSwitch(t *testing.T) {
	c := standalone(t)
	clock := sluicetest.NewManualClock(t0)
	rs := newStore(t, c, redis.WithClock(clock))
	ctx := context.Background()
	algs := sluice.Algorithms()
	for i := 0; i < 3*len(algs); i++ {
		r := sluice.Rule{Algorithm: algs[(i*5)%len(algs)], Limit: 3, Period: time.Second}
		d, err := rs.Take(ctx, sluice.Request{Key: "k", Rule: r, N: 2})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed || d.Remaining != 1 {
			t.Fatalf("%s after a switch: %+v, want allowed with 1 remaining", r.Algorithm, d)
		}
	}
}

var _ = goredis.Nil

// luaPrecision compares one key's decisions from Lua with another's. Lua's numbers are doubles:
// they hold every integer up to 2^53 ns (104 days), so while a key's durations stay below that
// the scripts agree with package algorithm to the nanosecond, and the comparison is exact.
// A key whose state went far beyond it (a settle's debt of a year: 2^55 ns, where a double's
// step is 8 ns) is carried to within a few steps of a double at that size, and each later
// decision on the state may add as much again, even once a refund has brought its durations
// back to seconds (CI saw 1 ns at 7 s after a debt of 7,337 h, and 2 ns at 449 h after 8,782
// h). So once a key's durations have reached 2^50 ns, each decision since adds to the
// tolerance twice the step of a double at the largest duration seen (intermediate values may
// be a little larger than those shown): a bound from the arithmetic, not a guess, which a
// logic error (off by an interval, a unit, a millisecond) still exceeds at once.
type luaPrecision struct {
	top   time.Duration // the largest duration the key's decisions have shown
	steps int64         // decisions since top reached 2^50 ns
}

// observe records one decision's durations (from either side) before a comparison.
func (p *luaPrecision) observe(ds ...sluice.Decision) {
	for _, d := range ds {
		p.top = max(p.top, d.RetryAfter, d.ResetAfter, d.Delay)
	}
	if p.top >= 1<<50 {
		p.steps++
	}
}

// same reports whether a and b agree within the tolerance observed so far.
func (p *luaPrecision) same(a, b sluice.Decision) bool {
	var tol time.Duration
	if p.top >= 1<<50 {
		tol = time.Duration(p.steps) << max(bits.Len64(uint64(p.top))-52, 0) // 2 x ulp(top) per step, at least 1 ns
	}
	near := func(x, y time.Duration) bool { return x-y <= tol && y-x <= tol }
	return a.Allowed == b.Allowed && a.Capacity == b.Capacity && a.Remaining == b.Remaining &&
		near(a.RetryAfter, b.RetryAfter) && near(a.ResetAfter, b.ResetAfter) && near(a.Delay, b.Delay)
}

// sameDecisions returns a Differential's Same for one key (see luaPrecision).
func sameDecisions() func(got, want sluice.Decision) bool {
	var p luaPrecision
	return func(got, want sluice.Decision) bool {
		p.observe(got, want)
		return p.same(got, want)
	}
}
