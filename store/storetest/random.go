package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The random request generators of the differential tests, which drive a store and the memory
// store (the reference) with the same random requests and want the same decisions.

var periods = []time.Duration{time.Millisecond, 3 * time.Millisecond, 7 * time.Millisecond, 60 * time.Millisecond,
	time.Second, 3 * time.Second, 7 * time.Second, time.Minute, time.Hour, 24 * time.Hour}

// RandomRule returns a valid random rule of algorithm a: periods from 1 ms to a day, limits
// from 1 to 100,000 (at most 50 for the sliding log), random bursts and sub-windows.
func RandomRule(rng *rand.Rand, a sluice.Algorithm) sluice.Rule {
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

// RandomStep returns a random clock step for traffic under r, in whole milliseconds: mostly
// about the rule's spacing of one unit, sometimes none, a jump of up to three periods, or a
// step back of up to one period.
func RandomStep(rng *rand.Rand, r sluice.Rule) time.Duration {
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

// RandomN returns a random cost under r: mostly small takes, sometimes a peek, a refund, a
// cost above the capacity or up to the capacity.
func RandomN(rng *rand.Rand, r sluice.Rule) int64 {
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

// RandomSettle returns the cost of a settle under r: a refund, a charge within the capacity,
// or one far past it (up to the debt bound and beyond).
func RandomSettle(rng *rand.Rand, r sluice.Rule) int64 {
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
	case 5:
		// A refund far past what the key holds, up to the largest a settle takes: it must
		// saturate at full, never wrap (a GCRA refund of 10,000 on a yearly rule once did).
		return -[]int64{c + 1 + rng.Int64N(10*c), 10_000, sluice.MaxLimit}[rng.IntN(3)]
	default:
		return 1 + rng.Int64N(c)
	}
}

// RandomRequest returns a random request on key under r: a settle of RandomSettle units one
// time in six, otherwise a take of RandomN units, with a random MaxDelay (up to two periods)
// one time in four for the bucket algorithms.
func RandomRequest(rng *rand.Rand, key string, r sluice.Rule) sluice.Request {
	req := sluice.Request{Key: key, Rule: r, N: RandomN(rng, r)}
	if rng.IntN(6) == 0 {
		req.Settle, req.N = true, RandomSettle(rng, r)
	} else if r.Algorithm.Bucket() && rng.IntN(4) == 0 {
		req.MaxDelay = time.Duration(rng.Int64N(2*int64(r.Period)/int64(time.Millisecond)+1)) * time.Millisecond
	} else if req.N > 0 && rng.IntN(3) == 0 { // a criticality class's holdback
		c := sluice.Criticalities()[rng.IntN(4)]
		req.Holdback = sluice.DefaultShares.Holdback(c, r.Capacity())
	}
	return req
}

// Differential holds a store to the reference (the memory store) request by request.
type Differential struct {
	Ref, Store sluice.Store
	// Same reports whether two decisions agree; nil means equal.
	Same    func(got, want sluice.Decision) bool
	history []string
}

// Step decides req on both stores at the instant at (reported in messages) and fails t, with
// the last steps, when the decisions differ or the store fails.
func (d *Differential) Step(t testing.TB, at time.Duration, req sluice.Request) {
	t.Helper()
	ctx := context.Background()
	want, werr := d.Ref.Take(ctx, req)
	got, err := d.Store.Take(ctx, req)
	line := fmt.Sprintf("key %q step %d at +%v: %s n=%d maxDelay=%v settle=%v holdback=%d budget=%+v:\n got  %+v %v\n want %+v %v",
		req.Key, len(d.history), at, req.Rule, req.N, req.MaxDelay, req.Settle, req.Holdback, req.Budget, got, err, want, werr)
	d.history = append(d.history, line)
	if werr != nil || err != nil { // a budget step on a reservation not open, say: the same error
		if werr == nil || err == nil || errors.Is(err, sluice.ErrStoreUnavailable) || !sameSentinel(err, werr) {
			t.Fatalf("%s\nhistory:\n%s", line, strings.Join(d.history[max(0, len(d.history)-8):], "\n"))
		}
		return
	}
	if d.Same == nil && got != want || d.Same != nil && !d.Same(got, want) {
		t.Fatalf("%s\nhistory:\n%s", line, strings.Join(d.history[max(0, len(d.history)-8):], "\n"))
	}
}

// sameSentinel reports whether a and b wrap the same validation sentinel.
func sameSentinel(a, b error) bool {
	for _, s := range []error{sluice.ErrNoReservation, sluice.ErrInvalidN, sluice.ErrInvalidRule, sluice.ErrInvalidKey} {
		if errors.Is(a, s) != errors.Is(b, s) {
			return false
		}
	}
	return true
}

// BudgetSteps draws random budget steps (sluice.Request.Budget) on one key over a small pool
// of reservation ids, so that steps on reservations not open, twice-committed ones and
// reserves of ids already open come up. Its zero value is ready to use.
type BudgetSteps struct {
	ids []sluice.ReservationID
}

// Next returns a random budget step on key under r: a reserve, an extension or a commit, of a
// cost from 0 to past the capacity (a commit's up to sluice.MaxLimit), in a random mode, with
// a TTL of the period or less, free on expiry or not.
func (b *BudgetSteps) Next(rng *rand.Rand, key string, r sluice.Rule) sluice.Request {
	if b.ids == nil {
		for range 6 {
			b.ids = append(b.ids, sluice.NewReservationID())
		}
	}
	c := r.Capacity()
	req := sluice.Request{Key: key, Rule: r, Budget: sluice.BudgetStep{
		ID:   b.ids[rng.IntN(len(b.ids))],
		Mode: sluice.BudgetMode(rng.IntN(2)),
	}}
	switch rng.IntN(10) {
	case 0, 1, 2, 3:
		req.Budget.Op = sluice.BudgetReserve
		req.Budget.FreeOnExpiry = rng.IntN(2) == 0
	case 4, 5:
		req.Budget.Op = sluice.BudgetExtend
	default:
		req.Budget.Op = sluice.BudgetCommit
	}
	switch rng.IntN(10) {
	case 0:
		req.N = 0
	case 1:
		req.N = c + 1 + rng.Int64N(c)
	case 2:
		if req.Budget.Op == sluice.BudgetCommit {
			req.N = sluice.MaxLimit - rng.Int64N(3)
		}
	default:
		req.N = 1 + rng.Int64N(max(1, c/2))
	}
	if req.Budget.Op != sluice.BudgetCommit && rng.IntN(2) == 0 {
		req.Budget.TTL = time.Duration(1+rng.Int64N(int64(r.Period/time.Millisecond))) * time.Millisecond
	}
	return req
}

// Rand returns a random source for a randomised test, seeded from SLUICE_SEED when it is set
// (to replay a failure) and from the clock otherwise; the seed is logged. stream tells tests
// sharing a seed apart.
func Rand(t testing.TB, stream uint64) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("SLUICE_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, stream))
}
