// Package storetest is the conformance suite every sluice.Store must pass, so the memory
// store, the Redis scripts and any later store cannot drift apart. Stores are driven through
// step tables at whole-millisecond instants of a sluicetest.ManualClock; a store that talks to a
// server must use the clock it is given (client time) for these tests.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clock sluice.Clock) sluice.Store {
//			s, err := memory.New(memory.WithClock(clock))
//			...
//			return s
//		})
//	}
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// NewStore returns a fresh store that reads time from clock. It is called once per subtest;
// cleanup belongs in t.Cleanup.
type NewStore func(t *testing.T, clock sluice.Clock) sluice.Store

// Base is the instant step tables start at: aligned to every period the tables use.
var Base = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Step is one decision of a table: at Base+At, take N (with MaxDelay), or settle N when
// Settle, or take the budget step Budget; expect Want, or an error wrapping Err.
type Step struct {
	At       time.Duration
	N        int64
	MaxDelay time.Duration
	Settle   bool
	Budget   sluice.BudgetStep
	Rule     *sluice.Rule // overrides the case's rule from this step on (a run-time change)
	Want     sluice.Decision
	Err      error
}

// Case is a step table on one key.
type Case struct {
	Name  string
	Rule  sluice.Rule
	Steps []Step
}

// Run runs the whole suite.
func Run(t *testing.T, newStore NewStore) { RunSkipping(t, newStore, nil) }

// RunSkipping runs the whole suite but the step tables for which skip gives a reason (a store
// that differs there by design, as the Redis store's counters where a clock goes back; see
// ClockGoesBack), which are skipped with it.
func RunSkipping(t *testing.T, newStore NewStore, skip func(Case) string) {
	run := fmt.Sprintf("%08x", rand.Uint32()) // keys unique across runs on a persistent server
	t.Run("Tables", func(t *testing.T) {
		for _, c := range Cases() {
			t.Run(c.Name, func(t *testing.T) {
				if skip != nil {
					if why := skip(c); why != "" {
						t.Skip(why)
					}
				}
				RunCase(t, newStore, run, c)
			})
		}
	})
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, newStore, run) })
	t.Run("KeyIsolation", func(t *testing.T) { testKeyIsolation(t, newStore, run) })
	t.Run("ManyKeys", func(t *testing.T) { testManyKeys(t, newStore, run) })
	t.Run("RuleChangeKeepsState", func(t *testing.T) { testRuleChange(t, newStore, run) })
	t.Run("ConcurrentTakers", func(t *testing.T) { testConcurrent(t, newStore, run) })
	t.Run("Settle", func(t *testing.T) { testSettle(t, newStore, run) })
	t.Run("DebtWithinPeriod", func(t *testing.T) { testDebtWithinPeriod(t, newStore, run) })
	t.Run("Criticality", func(t *testing.T) { testCriticality(t, newStore, run) })
	t.Run("CriticalityPace", func(t *testing.T) { testCriticalityPace(t, newStore, run) })
	t.Run("NextAfter", func(t *testing.T) { testNextAfter(t, newStore, run) })
	t.Run("BudgetBurst", func(t *testing.T) { testBudgetBurst(t, newStore, run) })
	t.Run("BudgetConcurrent", func(t *testing.T) { testBudgetConcurrent(t, newStore, run) })
	t.Run("BudgetBadInput", func(t *testing.T) { testBudgetBadInput(t, newStore, run) })
}

// ClockGoesBack reports whether a step of c comes before the step ahead of it.
func ClockGoesBack(c Case) bool {
	for i := 1; i < len(c.Steps); i++ {
		if c.Steps[i].At < c.Steps[i-1].At {
			return true
		}
	}
	return false
}

// RunCase plays one step table against a fresh store.
func RunCase(t *testing.T, newStore NewStore, run string, c Case) {
	clock := sluicetest.NewManualClock(Base)
	s := newStore(t, clock)
	key := "storetest:" + run + ":" + c.Name
	rule := c.Rule
	for i, st := range c.Steps {
		if st.Rule != nil {
			rule = *st.Rule
		}
		clock.Set(Base.Add(st.At))
		got, err := s.Take(context.Background(), sluice.Request{Key: key, Rule: rule, N: st.N, MaxDelay: st.MaxDelay, Settle: st.Settle, Budget: st.Budget})
		if st.Err != nil {
			if !errors.Is(err, st.Err) {
				t.Errorf("step %d (t=%v n=%d budget=%+v): error %v, want %v", i, st.At, st.N, st.Budget, err, st.Err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d (t=%v n=%d settle=%v budget=%+v): %v", i, st.At, st.N, st.Settle, st.Budget, err)
		}
		got.NextAfter = 0 // optional, each store's own: held to what it says by NextAfter (nextafter.go)
		if got != st.Want {
			t.Errorf("step %d (t=%v n=%d max_delay=%v settle=%v budget=%+v rule=%s):\n got  %+v\n want %+v", i, st.At, st.N, st.MaxDelay, st.Settle, st.Budget, rule, got, st.Want)
		}
	}
}

func ok(limit, remaining int64, reset time.Duration) sluice.Decision {
	return sluice.Decision{Allowed: true, Capacity: limit, Remaining: remaining, ResetAfter: reset}
}

func delayed(limit, remaining int64, reset, delay time.Duration) sluice.Decision {
	return sluice.Decision{Allowed: true, Capacity: limit, Remaining: remaining, ResetAfter: reset, Delay: delay}
}

// settled is the decision of a settle: allowed, with RetryAfter until the debt is paid.
func settled(limit, remaining int64, retry, reset time.Duration) sluice.Decision {
	return sluice.Decision{Allowed: true, Capacity: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

func deny(limit, remaining int64, retry, reset time.Duration) sluice.Decision {
	return sluice.Decision{Capacity: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

const ms = time.Millisecond

// Cases returns the step tables. Every expected value follows from the algorithm's
// definition in package algorithm; the comments give the arithmetic.
func Cases() []Case {
	return append(rateCases(), budgetCases()...)
}

// rateCases are the step tables of rate decisions: takes, peeks, refunds, waits, settles.
func rateCases() []Case {
	fixedHalf := sluice.FixedWindow(2, time.Second)
	return []Case{
		{Name: "fixed_window", Rule: sluice.FixedWindow(3, time.Second), Steps: []Step{
			{At: 0, N: 1, Want: ok(3, 2, 1000*ms)},
			{At: 100 * ms, N: 2, Want: ok(3, 0, 900*ms)},
			{At: 200 * ms, N: 1, Want: deny(3, 0, 800*ms, 800*ms)},
			{At: 300 * ms, N: 0, Want: ok(3, 0, 700*ms)}, // peek
			{At: 999 * ms, N: 1, Want: deny(3, 0, 1*ms, 1*ms)},
			{At: 1000 * ms, N: 1, Want: ok(3, 2, 1000*ms)}, // new window
			{At: 1000 * ms, N: 4, Want: deny(3, 2, sluice.Never, 1000*ms)},
			{At: 1500 * ms, N: -1, Want: ok(3, 3, 0)}, // refund
			{At: 1200 * ms, N: 3, Want: ok(3, 0, 800*ms)},
			{At: 900 * ms, N: 1, Want: deny(3, 0, 1100*ms, 1100*ms)}, // clock back: same window, nothing new
			{At: 2000 * ms, N: 3, Want: ok(3, 0, 1000*ms)},
		}},
		{Name: "fixed_window_settle", Rule: sluice.FixedWindow(3, time.Second), Steps: []Step{
			{At: 0, N: 1, Want: ok(3, 2, 1000*ms)},
			{At: 100 * ms, N: -1, Settle: true, Want: settled(3, 3, 0, 0)}, // refund
			{At: 100 * ms, N: 2, Want: ok(3, 1, 900*ms)},
			{At: 200 * ms, N: 4, Settle: true, Want: settled(3, 0, 800*ms, 800*ms)}, // 6 counted
			{At: 300 * ms, N: 1, Want: deny(3, 0, 700*ms, 700*ms)},
			{At: 300 * ms, N: 0, Settle: true, Want: settled(3, 0, 700*ms, 700*ms)},
			{At: 400 * ms, N: -2, Settle: true, Want: settled(3, 0, 600*ms, 600*ms)}, // 4: still in debt
			{At: 400 * ms, N: -1, Settle: true, Want: settled(3, 0, 0, 600*ms)},      // 3: paid, full
			{At: 400 * ms, N: 1, Want: deny(3, 0, 600*ms, 600*ms)},
			{At: 1000 * ms, N: 3, Want: ok(3, 0, 1000*ms)}, // the debt left with its window
		}},
		{Name: "fixed_window_limit_change", Rule: sluice.FixedWindow(10, time.Second), Steps: []Step{
			{At: 0, N: 8, Want: ok(10, 2, 1000*ms)},
			{At: 100 * ms, N: 1, Rule: &fixedHalf, Want: deny(2, 0, 900*ms, 900*ms)},
			{At: 2000 * ms, N: 2, Want: ok(2, 0, 1000*ms)},
		}},
		{Name: "sliding_log", Rule: sluice.SlidingLog(3, time.Second), Steps: []Step{
			{At: 0, N: 1, Want: ok(3, 2, 1000*ms)},
			{At: 200 * ms, N: 1, Want: ok(3, 1, 1000*ms)},
			{At: 400 * ms, N: 1, Want: ok(3, 0, 1000*ms)},
			{At: 500 * ms, N: 1, Want: deny(3, 0, 500*ms, 900*ms)},  // oldest (0) ages out at 1000
			{At: 1000 * ms, N: 1, Want: ok(3, 0, 1000*ms)},          // 0 aged out at exactly 1000
			{At: 1100 * ms, N: 2, Want: deny(3, 0, 300*ms, 900*ms)}, // needs 200 and 400 gone: 400+1000
			{At: 1100 * ms, N: 4, Want: deny(3, 0, sluice.Never, 900*ms)},
			{At: 1100 * ms, N: -1, Want: ok(3, 1, 300*ms)},           // refund drops the newest (1000)
			{At: 1100 * ms, N: 0, Want: ok(3, 1, 300*ms)},            // peek
			{At: 1100 * ms, N: 1, Want: ok(3, 0, 1000*ms)},           // log: 200, 400, 1100
			{At: 1050 * ms, N: 1, Want: deny(3, 0, 100*ms, 1000*ms)}, // clock back: time stands at 1100
			{At: 2100 * ms, N: 3, Want: ok(3, 0, 1000*ms)},
		}},
		{Name: "sliding_log_settle", Rule: sluice.SlidingLog(3, time.Second), Steps: []Step{
			{At: 0, N: 2, Want: ok(3, 1, 1000*ms)},
			// log 0, 0, 100, 100, 100: in debt until 0 and 0 have aged out
			{At: 100 * ms, N: 3, Settle: true, Want: settled(3, 0, 900*ms, 1000*ms)},
			{At: 200 * ms, N: 1, Want: deny(3, 0, 900*ms, 900*ms)}, // needs a 100 gone too
			{At: 1000 * ms, N: 1, Want: deny(3, 0, 100*ms, 100*ms)},
			{At: 1000 * ms, N: -1, Settle: true, Want: settled(3, 1, 0, 100*ms)}, // refund
			{At: 1000 * ms, N: 1, Want: ok(3, 0, 1000*ms)},
			// at 1500 the log holds 1000; 10 more are kept as the newest 2 x 3 = 6 (1000 dropped)
			{At: 1500 * ms, N: 10, Settle: true, Want: settled(3, 0, 1000*ms, 1000*ms)},
			{At: 1600 * ms, N: -2, Settle: true, Want: settled(3, 0, 900*ms, 900*ms)},
			{At: 1600 * ms, N: 0, Want: deny(3, 0, 900*ms, 900*ms)}, // a peek denies while in debt
			{At: 2500 * ms, N: 1, Want: ok(3, 2, 1000*ms)},
		}},
		{Name: "sliding_window_two_windows", Rule: sluice.PerSecond(10), Steps: []Step{
			{At: 0, N: 5, Want: ok(10, 5, 2000*ms)},
			{At: 500 * ms, N: 5, Want: ok(10, 0, 1500*ms)},
			// At 1000 the previous window (10) weighs 100%: 9 fit once its weight is 0.9.
			{At: 1000 * ms, N: 1, Want: deny(10, 0, 100*ms, 1000*ms)},
			{At: 1100 * ms, N: 1, Want: ok(10, 0, 1900*ms)}, // 1 + ceil(10 x 0.9)
			{At: 1500 * ms, N: 0, Want: ok(10, 4, 1500*ms)}, // 1 + 10 x 0.5
			{At: 1500 * ms, N: 5, Want: deny(10, 4, 100*ms, 1500*ms)},
			{At: 1500 * ms, N: 11, Want: deny(10, 4, sluice.Never, 1500*ms)},
			{At: 1500 * ms, N: -1, Want: ok(10, 5, 500*ms)},
			{At: 900 * ms, N: 1, Want: deny(10, 0, 100*ms, 1000*ms)}, // clock back: stands at 1000, old weighs 100%
			{At: 3000 * ms, N: 1, Want: ok(10, 9, 2000*ms)},
		}},
		{Name: "sliding_window_sub_windows", Rule: sluice.SlidingWindow(4, 400*ms, 4), Steps: []Step{
			{At: 0, N: 1, Want: ok(4, 3, 500*ms)},
			{At: 100 * ms, N: 1, Want: ok(4, 2, 500*ms)},
			{At: 200 * ms, N: 1, Want: ok(4, 1, 500*ms)},
			{At: 300 * ms, N: 1, Want: ok(4, 0, 500*ms)},
			{At: 350 * ms, N: 1, Want: deny(4, 0, 150*ms, 450*ms)},
			{At: 450 * ms, N: 1, Want: deny(4, 0, 50*ms, 350*ms)}, // 3 + ceil(1 x 0.5)
			{At: 500 * ms, N: 1, Want: ok(4, 0, 500*ms)},
		}},
		{Name: "sliding_window_settle", Rule: sluice.PerSecond(10), Steps: []Step{
			{At: 0, N: 5, Want: ok(10, 5, 2000*ms)},
			// 15 in window 0: the estimate is back to 10 when 15 x (1 - f) <= 10, f = 1/3 of
			// window 1 (rounded up to the ns): 1333.333334 ms
			{At: 500 * ms, N: 10, Settle: true, Want: settled(10, 0, 833333334, 1500*ms)},
			{At: 1000 * ms, N: 1, Want: deny(10, 0, 400*ms, 1000*ms)}, // 9 fit at f = 0.4
			{At: 1000 * ms, N: -6, Settle: true, Want: settled(10, 1, 0, 1000*ms)},
			{At: 1000 * ms, N: 1, Want: ok(10, 0, 2000*ms)},
		}},
		{Name: "token_bucket", Rule: sluice.TokenBucket(10, time.Second, 5), Steps: []Step{
			{At: 0, N: 5, Want: ok(5, 0, 500*ms)},
			{At: 0, N: 1, Want: deny(5, 0, 100*ms, 500*ms)},
			{At: 100 * ms, N: 1, Want: ok(5, 0, 500*ms)},
			{At: 350 * ms, N: 0, Want: ok(5, 2, 250*ms)}, // 2.5 tokens
			{At: 350 * ms, N: 3, Want: deny(5, 2, 50*ms, 250*ms)},
			{At: 350 * ms, N: 6, Want: deny(5, 2, sluice.Never, 250*ms)},
			{At: 350 * ms, N: -1, Want: ok(5, 3, 150*ms)},
			{At: 300 * ms, N: 1, Want: ok(5, 2, 250*ms)}, // clock back: no refill, nothing lost
			{At: 2000 * ms, N: 0, Want: ok(5, 5, 0)},
		}},
		{Name: "token_bucket_wait", Rule: sluice.TokenBucket(10, time.Second, 2), Steps: []Step{
			{At: 0, N: 2, Want: ok(2, 0, 200*ms)},
			{At: 0, N: 1, MaxDelay: time.Second, Want: delayed(2, 0, 300*ms, 100*ms)},
			{At: 0, N: 1, MaxDelay: 150 * ms, Want: deny(2, 0, 50*ms, 300*ms)},
			{At: 0, N: 1, MaxDelay: 200 * ms, Want: delayed(2, 0, 400*ms, 200*ms)},
			{At: 400 * ms, N: 1, Want: ok(2, 1, 100*ms)},
		}},
		{Name: "leaky_bucket_meter", Rule: sluice.LeakyBucket(10, time.Second, 3), Steps: []Step{
			{At: 0, N: 3, Want: ok(3, 0, 300*ms)},
			{At: 50 * ms, N: 1, Want: deny(3, 0, 50*ms, 250*ms)},
			{At: 150 * ms, N: 1, Want: ok(3, 0, 250*ms)},
			{At: 150 * ms, N: 4, Want: deny(3, 0, sluice.Never, 250*ms)},
			{At: 150 * ms, N: -2, Want: ok(3, 2, 50*ms)},
		}},
		{Name: "token_bucket_settle", Rule: sluice.TokenBucket(10, time.Second, 5), Steps: []Step{
			{At: 0, N: 2, Want: ok(5, 3, 200*ms)},
			{At: 0, N: 6, Settle: true, Want: settled(5, 0, 300*ms, 800*ms)}, // 8 used: 3 tokens below zero
			{At: 100 * ms, N: 1, Want: deny(5, 0, 300*ms, 700*ms)},
			{At: 400 * ms, N: 1, Want: ok(5, 0, 500*ms)},
			{At: 400 * ms, N: -3, Settle: true, Want: settled(5, 3, 0, 200*ms)}, // refund
			{At: 400 * ms, N: 0, Settle: true, Want: settled(5, 3, 0, 200*ms)},
			{At: 2000 * ms, N: 0, Want: ok(5, 5, 0)},
		}},
		{Name: "token_bucket_debt_bound", Rule: sluice.TokenBucket(1000, time.Millisecond, 0), Steps: []Step{
			// 1 µs per token; the debt is capped at what refills in one period (1000 tokens,
			// paid within 1 ms): a settle of MaxLimit charges the capacity and that much, and
			// a second one adds nothing
			{At: 0, N: sluice.MaxLimit, Settle: true, Want: settled(1000, 0, time.Millisecond, 2*time.Millisecond)},
			{At: 0, N: sluice.MaxLimit, Settle: true, Want: settled(1000, 0, time.Millisecond, 2*time.Millisecond)},
		}},
		{Name: "leaky_bucket_settle", Rule: sluice.LeakyBucket(10, time.Second, 3), Steps: []Step{
			{At: 0, N: 3, Want: ok(3, 0, 300*ms)},
			{At: 0, N: 2, Settle: true, Want: settled(3, 0, 200*ms, 500*ms)}, // 5 held, 2 above the capacity
			{At: 100 * ms, N: 1, MaxDelay: time.Second, Want: deny(3, 0, 200*ms, 400*ms)},
			{At: 300 * ms, N: 1, Want: ok(3, 0, 300*ms)},
		}},
		{Name: "leaky_bucket_queue", Rule: sluice.LeakyBucket(10, time.Second, 3), Steps: []Step{
			{At: 0, N: 1, MaxDelay: time.Second, Want: delayed(3, 2, 100*ms, 0)},
			{At: 0, N: 1, MaxDelay: time.Second, Want: delayed(3, 1, 200*ms, 100*ms)},
			{At: 0, N: 1, MaxDelay: time.Second, Want: delayed(3, 0, 300*ms, 200*ms)},
			{At: 0, N: 1, MaxDelay: time.Second, Want: deny(3, 0, 100*ms, 300*ms)}, // queue full
			{At: 0, N: 1, MaxDelay: 150 * ms, Want: deny(3, 0, 150*ms, 300*ms)},
			{At: 250 * ms, N: 1, MaxDelay: 100 * ms, Want: delayed(3, 1, 150*ms, 50*ms)},
			{At: 250 * ms, N: 1, Want: ok(3, 0, 250*ms)}, // the meter admits what fits at once
		}},
		{Name: "gcra", Rule: sluice.GCRA(10, time.Second, 5), Steps: []Step{
			{At: 0, N: 5, Want: ok(5, 0, 500*ms)},
			{At: 0, N: 1, Want: deny(5, 0, 100*ms, 500*ms)},
			{At: 100 * ms, N: 1, Want: ok(5, 0, 500*ms)},
			{At: 350 * ms, N: 0, Want: ok(5, 2, 250*ms)},
			{At: 350 * ms, N: 3, Want: deny(5, 2, 50*ms, 250*ms)},
			{At: 350 * ms, N: 6, Want: deny(5, 2, sluice.Never, 250*ms)},
			{At: 350 * ms, N: -1, Want: ok(5, 3, 150*ms)},
			{At: 300 * ms, N: 1, Want: ok(5, 2, 300*ms)}, // clock back: TAT 600 is further ahead
			{At: 2000 * ms, N: 0, Want: ok(5, 5, 0)},
		}},
		{Name: "gcra_settle", Rule: sluice.GCRA(10, time.Second, 5), Steps: []Step{
			{At: 0, N: 0, Settle: true, Want: settled(5, 5, 0, 0)}, // settle 0 on a new key: reports
			{At: 0, N: 2, Want: ok(5, 3, 200*ms)},
			// TAT 200 + 6 x 100 = 800: 300 ms past the burst window of 500
			{At: 0, N: 6, Settle: true, Want: settled(5, 0, 300*ms, 800*ms)},
			{At: 100 * ms, N: 1, Want: deny(5, 0, 300*ms, 700*ms)},
			{At: 400 * ms, N: 1, Want: ok(5, 0, 500*ms)}, // debt paid at 300, then one more unit
			{At: 400 * ms, N: -3, Settle: true, Want: settled(5, 3, 0, 200*ms)},
			{At: 400 * ms, N: 0, Settle: true, Want: settled(5, 3, 0, 200*ms)},
			{At: 2000 * ms, N: 0, Want: ok(5, 5, 0)},
		}},
		{Name: "gcra_wait", Rule: sluice.GCRA(10, time.Second, 2), Steps: []Step{
			{At: 0, N: 2, Want: ok(2, 0, 200*ms)},
			{At: 0, N: 1, MaxDelay: time.Second, Want: delayed(2, 0, 300*ms, 100*ms)},
			{At: 0, N: 1, MaxDelay: 150 * ms, Want: deny(2, 0, 50*ms, 300*ms)},
			{At: 0, N: 1, MaxDelay: 200 * ms, Want: delayed(2, 0, 400*ms, 200*ms)},
			{At: 400 * ms, N: 1, Want: ok(2, 1, 100*ms)},
		}},
	}
}

func testBadInput(t *testing.T, newStore NewStore, run string) {
	s := newStore(t, sluicetest.NewManualClock(Base))
	ctx := context.Background()
	good := sluice.TokenBucket(10, time.Second, 0)
	key := "storetest:" + run + ":bad"
	bad := []struct {
		name string
		req  sluice.Request
		want error
	}{
		{"empty key", sluice.Request{Rule: good, N: 1}, sluice.ErrInvalidKey},
		{"long key", sluice.Request{Key: strings.Repeat("k", sluice.DefaultMaxKeyLength+1), Rule: good, N: 1}, sluice.ErrInvalidKey},
		{"zero rule", sluice.Request{Key: key, N: 1}, sluice.ErrInvalidRule},
		{"limit 0", sluice.Request{Key: key, Rule: sluice.TokenBucket(0, time.Second, 0), N: 1}, sluice.ErrInvalidRule},
		{"period 0", sluice.Request{Key: key, Rule: sluice.FixedWindow(1, 0), N: 1}, sluice.ErrInvalidRule},
		{"unknown algorithm", sluice.Request{Key: key, Rule: sluice.Rule{Algorithm: 99, Limit: 1, Period: time.Second}, N: 1}, sluice.ErrInvalidRule},
		{"burst on a window", sluice.Request{Key: key, Rule: sluice.FixedWindow(1, time.Second).WithBurst(3), N: 1}, sluice.ErrInvalidRule},
		{"huge refund", sluice.Request{Key: key, Rule: good, N: -sluice.MaxLimit - 1}, sluice.ErrInvalidN},
		{"negative max delay", sluice.Request{Key: key, Rule: good, N: 1, MaxDelay: -1}, sluice.ErrInvalidN},
		{"huge settle", sluice.Request{Key: key, Rule: good, N: sluice.MaxLimit + 1, Settle: true}, sluice.ErrInvalidN},
		{"huge settle refund", sluice.Request{Key: key, Rule: good, N: -sluice.MaxLimit - 1, Settle: true}, sluice.ErrInvalidN},
		{"settle with max delay", sluice.Request{Key: key, Rule: good, N: 1, MaxDelay: time.Second, Settle: true}, sluice.ErrInvalidN},
		{"settle with a bad rule", sluice.Request{Key: key, Rule: sluice.TokenBucket(0, time.Second, 0), N: 1, Settle: true}, sluice.ErrInvalidRule},
	}
	for _, b := range bad {
		if _, err := s.Take(ctx, b.req); !errors.Is(err, b.want) {
			t.Errorf("%s: got error %v, want %v", b.name, err, b.want)
		}
	}
	// Nothing was consumed by the rejected requests.
	d, err := s.Take(ctx, sluice.Request{Key: key, Rule: good, N: 0})
	if err != nil || d.Remaining != 10 {
		t.Errorf("after bad input: remaining %d, err %v; want 10, nil", d.Remaining, err)
	}
	// A key of exactly the maximum length is fine.
	long := key + strings.Repeat("x", sluice.DefaultMaxKeyLength-len(key))
	if d, err := s.Take(ctx, sluice.Request{Key: long, Rule: good, N: 1}); err != nil || !d.Allowed {
		t.Errorf("key of the maximum length: %+v, %v", d, err)
	}
}

func testKeyIsolation(t *testing.T, newStore NewStore, run string) {
	s := newStore(t, sluicetest.NewManualClock(Base))
	ctx := context.Background()
	rule := sluice.FixedWindow(1, time.Second)
	keys := []string{"a", "a{b}", "{a}", "a{c}", "{a}b", "a}{", "a\n", "a\x00", "ä", "a:b", "a|b"}
	for _, k := range keys {
		d, err := s.Take(ctx, sluice.Request{Key: "storetest:" + run + ":iso:" + k, Rule: rule, N: 1})
		if err != nil || !d.Allowed {
			t.Errorf("key %q: first take %+v, %v: keys must not share state", k, d, err)
		}
	}
}

func testManyKeys(t *testing.T, newStore NewStore, run string) {
	s := newStore(t, sluicetest.NewManualClock(Base))
	ctx := context.Background()
	rule := sluice.SlidingLog(2, time.Minute)
	const keys = 500
	for i := 0; i < keys; i++ {
		key := fmt.Sprintf("storetest:%s:many:%d", run, i)
		for j := 0; j < 3; j++ {
			d, err := s.Take(ctx, sluice.Request{Key: key, Rule: rule, N: 1})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != (j < 2) {
				t.Fatalf("key %d take %d: allowed=%v", i, j, d.Allowed)
			}
		}
	}
}

// eachAlgorithm runs f in a subtest per algorithm, on a fresh store with a manual clock at Base.
func eachAlgorithm(t *testing.T, newStore NewStore, f func(t *testing.T, a sluice.Algorithm, s sluice.Store, clock *sluicetest.ManualClock)) {
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			clock := sluicetest.NewManualClock(Base)
			f(t, a, newStore(t, clock), clock)
		})
	}
}

func testRuleChange(t *testing.T, newStore NewStore, run string) {
	eachAlgorithm(t, newStore, func(t *testing.T, a sluice.Algorithm, s sluice.Store, clock *sluicetest.ManualClock) {
		ctx := context.Background()
		key := "storetest:" + run + ":change:" + a.String()
		small := sluice.Rule{Algorithm: a, Limit: 10, Period: time.Second}
		big := sluice.Rule{Algorithm: a, Limit: 20, Period: time.Second}
		if d, err := s.Take(ctx, sluice.Request{Key: key, Rule: small, N: 8}); err != nil || !d.Allowed {
			t.Fatalf("take 8: %+v %v", d, err)
		}
		clock.Advance(time.Millisecond)
		d, err := s.Take(ctx, sluice.Request{Key: key, Rule: big, N: 0})
		if err != nil {
			t.Fatal(err)
		}
		// Window algorithms keep the 8 units (12 left); buckets keep them less 1 ms of
		// refill; GCRA keeps the consumed time (800 ms of 1 s: 4 left).
		if d.Remaining > 12 || d.Remaining < 4 || d.Capacity != 20 {
			t.Errorf("after raising the limit to 20: %+v; the 8 units consumed were lost", d)
		}
	})
}

func testConcurrent(t *testing.T, newStore NewStore, run string) {
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			s := newStore(t, sluicetest.NewManualClock(Base))
			const limit, workers = 50, 16
			rule := sluice.Rule{Algorithm: a, Limit: limit, Period: time.Hour}
			key := "storetest:" + run + ":concurrent:" + a.String()
			var admitted, failed atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 3*limit/workers+1; i++ {
						d, err := s.Take(context.Background(), sluice.Request{Key: key, Rule: rule, N: 1})
						if err != nil {
							failed.Add(1)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if failed.Load() != 0 {
				t.Fatalf("%d takes failed", failed.Load())
			}
			if admitted.Load() != limit {
				t.Errorf("%d concurrent takers admitted %d, want exactly %d (clock frozen)", workers, admitted.Load(), limit)
			}
		})
	}
}

// testDebtWithinPeriod checks that a settle's debt never outlives its rule's period (issue 31,
// item 6): the largest settle on a key of a 1 s rule (10 a second, a burst of 20 for the
// buckets) is paid within the period (the sliding window's within Period + Period/SubWindows)
// and the key is back to full within that plus the time its capacity takes to refill; and the
// store keeps the debt that long (a take before it is paid is denied, one once it is paid and a
// unit is back is admitted).
// A shared store keeps a key for its ResetAfter, so this bounds its TTL too.
func testDebtWithinPeriod(t *testing.T, newStore NewStore, run string) {
	eachAlgorithm(t, newStore, func(t *testing.T, a sluice.Algorithm, s sluice.Store, clock *sluicetest.ManualClock) {
		ctx := context.Background()
		rule := DebtRule(a, time.Second)
		debt, full := DebtBounds(rule)
		key := "storetest:" + run + ":debt:" + a.String()
		d, err := s.Take(ctx, sluice.Request{Key: key, Rule: rule, N: sluice.MaxLimit, Settle: true})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > debt || d.ResetAfter > full {
			t.Fatalf("settle %d on %s: %+v, want the debt paid within %v and the key full within %v", int64(sluice.MaxLimit), rule, d, debt, full)
		}
		clock.Set(Base.Add(d.RetryAfter - time.Millisecond))
		if d, err := s.Take(ctx, sluice.Request{Key: key, Rule: rule, N: 1}); err != nil || d.Allowed {
			t.Fatalf("take 1 ms before the debt is paid: %+v, %v, want denied", d, err)
		}
		paid := d.RetryAfter + rule.Period/time.Duration(rule.Limit) + time.Millisecond // and one unit back
		clock.Set(Base.Add(paid))
		if d, err := s.Take(ctx, sluice.Request{Key: key, Rule: rule, N: 1}); err != nil || !d.Allowed {
			t.Fatalf("take once the debt is paid and a unit is back (+%v): %+v, %v, want admitted", paid, d, err)
		}
	})
}

// DebtRule is the rule of algorithm a that the debt tests settle on: 10 per period, and a
// burst of 20 for the buckets (whose capacity then takes two periods to refill).
func DebtRule(a sluice.Algorithm, period time.Duration) sluice.Rule {
	r := sluice.Rule{Algorithm: a, Limit: 10, Period: period}
	if a.Bucket() {
		r.Burst = 20
	}
	return r
}

// DebtBounds returns, for a valid rule r, the longest a settle's debt may take to be paid
// (algorithm.MaxDebt: one period; the sliding window's, Period + Period/SubWindows) and the
// longest a key in debt may take to be back to full: that plus the time its capacity takes to
// refill (a period for the window algorithms). A shared store keeps a key no longer than the
// latter (plus its own slack).
func DebtBounds(r sluice.Rule) (debt, full time.Duration) {
	debt, refill := r.Period, r.Period
	switch {
	case r.Algorithm.Bucket():
		refill = time.Duration(float64(r.Capacity()) * float64(r.Period) / float64(r.Limit))
	case r.Algorithm == sluice.AlgorithmSlidingWindow:
		debt += r.Period / time.Duration(r.Windows())
	}
	return debt, debt + refill
}

// testSettle checks settles on every algorithm: a refund gives back what was taken; a charge
// past the limit is admitted whatever the limit and puts the key in debt, which denies every
// request (and every peek) until the RetryAfter the settle reported, and no longer; a settle of
// 0 changes nothing.
func testSettle(t *testing.T, newStore NewStore, run string) {
	eachAlgorithm(t, newStore, func(t *testing.T, a sluice.Algorithm, s sluice.Store, clock *sluicetest.ManualClock) {
		ctx := context.Background()
		rule := sluice.Rule{Algorithm: a, Limit: 10, Period: time.Second}
		key := "storetest:" + run + ":settle:" + a.String()
		take := func(n int64, settle bool) sluice.Decision {
			t.Helper()
			d, err := s.Take(ctx, sluice.Request{Key: key, Rule: rule, N: n, Settle: settle})
			if err != nil {
				t.Fatalf("n=%d settle=%v at +%v: %v", n, settle, clock.Now().Sub(Base), err)
			}
			return d
		}
		if d := take(4, false); !d.Allowed || d.Remaining != 6 {
			t.Fatalf("estimate 4: %+v", d)
		}
		if d := take(-3, true); !d.Allowed || d.Remaining != 9 || d.RetryAfter != 0 {
			t.Fatalf("settle -3 (refund): %+v, want allowed with 9 remaining", d)
		}
		if d := take(0, true); !d.Allowed || d.Remaining != 9 || d.RetryAfter != 0 {
			t.Fatalf("settle 0: %+v, want allowed with 9 remaining", d)
		}
		// 1 used, then 24 more: 15 past the limit.
		d := take(24, true)
		if !d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 || d.ResetAfter < d.RetryAfter {
			t.Fatalf("settle 24 past the limit: %+v, want allowed, 0 remaining, a positive RetryAfter", d)
		}
		paid := d.RetryAfter
		if d := take(1, false); d.Allowed || d.RetryAfter <= 0 {
			t.Fatalf("a request while in debt: %+v, want denied", d)
		}
		before := (paid - 1).Truncate(time.Millisecond) // the last whole ms still in debt
		clock.Set(Base.Add(before))
		if d := take(0, false); d.Allowed || d.Remaining != 0 {
			t.Fatalf("peek at +%v, before the debt is paid at +%v: %+v, want denied", before, paid, d)
		}
		if d := take(1, false); d.Allowed {
			t.Fatalf("take 1 at +%v, before the debt is paid at +%v: %+v, want denied", before, paid, d)
		}
		after := (paid + time.Millisecond - 1).Truncate(time.Millisecond)
		clock.Set(Base.Add(after))
		if d := take(0, false); !d.Allowed {
			t.Fatalf("peek at +%v, once the debt is paid at +%v: %+v, want allowed", after, paid, d)
		}
		clock.Set(Base.Add(after + 3*rule.Period))
		if d := take(10, false); !d.Allowed {
			t.Fatalf("take 10 three periods after the debt was paid: %+v, want allowed", d)
		}
	})
}
