package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/redis"
)

var periods = []time.Duration{time.Millisecond, 3 * time.Millisecond, 7 * time.Millisecond, 60 * time.Millisecond,
	time.Second, 3 * time.Second, 7 * time.Second, time.Minute, time.Hour, 24 * time.Hour}

func randomRule(rng *rand.Rand, a sluice.Algorithm) sluice.Rule {
	for {
		r := sluice.Rule{Algorithm: a, Period: periods[rng.IntN(len(periods))]}
		switch rng.IntN(4) {
		case 0:
			r.Limit = 1 + rng.Int64N(3)
		case 1:
			r.Limit = 1 + rng.Int64N(20)
		case 2:
			r.Limit = 1 + rng.Int64N(1000)
		default:
			r.Limit = 1 + rng.Int64N(100_000)
		}
		if a == sluice.AlgorithmSlidingLog {
			r.Limit = min(r.Limit, 50)
		}
		if a.Bucket() && rng.IntN(2) == 0 {
			r.Burst = 1 + rng.Int64N(3*r.Limit)
		}
		if a == sluice.AlgorithmSlidingWindow && rng.IntN(2) == 0 {
			r.SubWindows = []int{1, 2, 3, 4, 5, 10, 60}[rng.IntN(7)]
		}
		if r.Validate() == nil {
			return r
		}
	}
}

func randomStep(rng *rand.Rand, r sluice.Rule) time.Duration {
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1:
		return -time.Duration(rng.Int64N(int64(r.Period)/int64(time.Millisecond)+1)) * time.Millisecond
	case 2:
		return time.Duration(rng.Int64N(3*int64(r.Period)/int64(time.Millisecond)+1)) * time.Millisecond
	default:
		per := max(1, int64(r.Period)/int64(time.Millisecond)/max(1, r.Limit))
		return time.Duration(rng.Int64N(2*per+1)) * time.Millisecond
	}
}

func randomN(rng *rand.Rand, r sluice.Rule) int64 {
	c := r.Capacity()
	switch rng.IntN(12) {
	case 0:
		return 0
	case 1:
		return -1 - rng.Int64N(c)
	case 2:
		return c + 1 + rng.Int64N(2)
	case 3:
		return 1 + rng.Int64N(c)
	default:
		return 1 + rng.Int64N(min(c, 3))
	}
}

// randomSettle returns the cost of a settle: a refund, a charge within the capacity, or one
// far past it (up to the debt bound and beyond).
func randomSettle(rng *rand.Rand, r sluice.Rule) int64 {
	c := r.Capacity()
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1, 2:
		return -1 - rng.Int64N(c)
	case 3:
		return c + rng.Int64N(10*c)
	case 4:
		return sluice.MaxLimit - rng.Int64N(3)
	default:
		return 1 + rng.Int64N(c)
	}
}

// TestDifferential drives the Redis store and the memory store (the reference) with the same
// random requests at whole-millisecond instants of one manual clock, and wants the same
// decisions: the Lua scripts mirror package algorithm exactly.
func TestDifferential(t *testing.T) {
	c := standalone(t)
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("SLUICE_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
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
			ctx := context.Background()
			for k := 0; k < keys; k++ {
				clock.Set(t0.Add(time.Duration(rng.Int64N(1000)) * time.Millisecond))
				key := "k" + string(rune('a'+k%26)) + "{" + string(rune('0'+k/26)) + "}"
				r := randomRule(rng, a)
				var history []string
				for i := 0; i < steps; i++ {
					if rng.IntN(40) == 0 {
						r = randomRule(rng, a) // a rule change keeps the state where it can
					}
					clock.Advance(randomStep(rng, r))
					req := sluice.Request{Key: key, Rule: r, N: randomN(rng, r)}
					if rng.IntN(6) == 0 {
						req.Settle, req.N = true, randomSettle(rng, r)
					} else if a.Bucket() && rng.IntN(4) == 0 {
						req.MaxDelay = time.Duration(rng.Int64N(2*int64(r.Period)/int64(time.Millisecond)+1)) * time.Millisecond
					} else if req.N > 0 && rng.IntN(3) == 0 { // a criticality class's reserve
						c := sluice.Criticalities()[rng.IntN(4)]
						req.Reserve = sluice.DefaultShares.Reserve(c, r.Capacity())
					}
					want, err := ms.Take(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					got, err := rs.Take(ctx, req)
					if err != nil {
						t.Fatalf("key %d step %d %s n=%d: %v", k, i, r, req.N, err)
					}
					step := fmt.Sprintf("step %d at +%v: %s n=%d maxDelay=%v settle=%v reserve=%d:\n got  %+v\n want %+v",
						i, clock.Now().Sub(t0), r, req.N, req.MaxDelay, req.Settle, req.Reserve, got, want)
					history = append(history, step)
					if !sameDecision(got, want) {
						t.Fatalf("key %d %s\nhistory:\n%s", k, step, strings.Join(history[max(0, len(history)-8):], "\n"))
					}
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

// sameDecision compares decisions exactly, except durations beyond 2^52 ns (52 days), which
// Lua's doubles carry to within 2^-50 of their value (see package doc).
func sameDecision(a, b sluice.Decision) bool {
	near := func(x, y time.Duration) bool {
		if x == y {
			return true
		}
		if max(x, y) < 1<<52 {
			return false
		}
		d, m := x-y, max(x, y)>>50
		return d <= m && d >= -m
	}
	return a.Allowed == b.Allowed && a.Limit == b.Limit && a.Remaining == b.Remaining &&
		near(a.RetryAfter, b.RetryAfter) && near(a.ResetAfter, b.ResetAfter) && near(a.Delay, b.Delay)
}
