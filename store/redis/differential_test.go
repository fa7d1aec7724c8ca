package redis_test

import (
	"context"
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
	c := standalone(t)
	rng := storetest.Rand(t, 1)
	keys := 60
	steps := 120
	if testing.Short() {
		keys, steps = 12, 60
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
				key := "k" + string(rune('a'+k%26)) + "{" + string(rune('0'+k/26)) + "}"
				r := storetest.RandomRule(rng, a)
				diff := storetest.Differential{Ref: ms, Store: rs, Same: sameDecision}
				for i := 0; i < steps; i++ {
					if rng.IntN(40) == 0 {
						r = storetest.RandomRule(rng, a) // a rule change keeps the state where it can
					}
					clock.Advance(storetest.RandomStep(rng, r))
					diff.Step(t, clock.Now().Sub(t0), storetest.RandomRequest(rng, key, r))
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

// sameDecision compares decisions exactly, except durations beyond 2^50 ns (13 days): Lua's
// doubles carry a duration to within 2^-52 of its value, so a key whose state went far past
// that (a debt of a year: 2^55 ns, an ulp of 8 ns) keeps an error of a few ns after a refund
// brings its durations back to weeks (a CI run saw 2 ns at 449 h after 8,782 h). Tolerated:
// 16 ns, or 2^-50 of the value beyond 2^54 ns (see package doc).
func sameDecision(a, b sluice.Decision) bool {
	near := func(x, y time.Duration) bool {
		if x == y {
			return true
		}
		if max(x, y) < 1<<50 {
			return false
		}
		d, m := x-y, max(max(x, y)>>50, 16)
		return d <= m && d >= -m
	}
	return a.Allowed == b.Allowed && a.Limit == b.Limit && a.Remaining == b.Remaining &&
		near(a.RetryAfter, b.RetryAfter) && near(a.ResetAfter, b.ResetAfter) && near(a.Delay, b.Delay)
}
