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

// The budget part of the suite: reservations (sluice.Request.Budget) decided with the key's
// state in one atomic step, as package algorithm's Ledger decides them.

// reservation returns budget step op on reservation id (its first byte; the rest zero).
func reservation(op sluice.BudgetOp, id byte, mode sluice.BudgetMode) sluice.BudgetStep {
	b := sluice.BudgetStep{Op: op, Mode: mode}
	b.ID[0] = id
	return b
}

func reserve(id byte, mode sluice.BudgetMode) sluice.BudgetStep {
	return reservation(sluice.BudgetReserve, id, mode)
}

func extend(id byte, mode sluice.BudgetMode) sluice.BudgetStep {
	return reservation(sluice.BudgetExtend, id, mode)
}

func commit(id byte) sluice.BudgetStep { return reservation(sluice.BudgetCommit, id, 0) }

// ttl returns b with a TTL and, when free, FreeOnExpiry.
func ttl(b sluice.BudgetStep, d time.Duration, free bool) sluice.BudgetStep {
	b.TTL, b.FreeOnExpiry = d, free
	return b
}

const (
	strict  = sluice.Strict
	bounded = sluice.Bounded
)

// budgetCases are the step tables of budget reservations. Each step's arithmetic is in its
// comment; package algorithm's Ledger documents the rules.
func budgetCases() []Case {
	return []Case{
		{Name: "fixed_window_budget", Rule: sluice.FixedWindow(10, time.Second), Steps: []Step{
			{At: 0, N: 6, Budget: reserve(1, strict), Want: ok(10, 10, 1000*ms)},                 // a reserve's remaining: what was left when it came
			{At: 100 * ms, N: 5, Budget: reserve(2, strict), Want: deny(10, 4, 900*ms, 900*ms)},  // 5 > 4 left
			{At: 100 * ms, N: 5, Budget: reserve(2, bounded), Want: ok(10, 4, 900*ms)},           // 4 left: not spent; 11 counted
			{At: 200 * ms, N: 1, Budget: reserve(3, bounded), Want: deny(10, 0, 800*ms, 800*ms)}, // spent
			{At: 200 * ms, N: 2, Budget: commit(1), Want: settled(10, 3, 0, 800*ms)},             // #1: 4 of its 6 back: 7
			{At: 200 * ms, N: 2, Budget: commit(1), Err: sluice.ErrNoReservation},                // twice
			{At: 300 * ms, N: 2, Budget: extend(2, strict), Want: ok(10, 3, 700*ms)},             // #2 holds 7: 9
			{At: 300 * ms, N: 3, Budget: commit(2), Want: settled(10, 5, 0, 700*ms)},             // 4 back: 5
			{At: 900 * ms, N: 4, Budget: ttl(reserve(4, strict), 500*ms, true), Want: ok(10, 5, 100*ms)},
			// the next window: #4's units left with the last one, nothing to give back
			{At: 1000 * ms, N: 0, Budget: commit(4), Want: settled(10, 10, 0, 0)},
			{At: 1000 * ms, N: 10, Budget: ttl(reserve(5, strict), 100*ms, false), Want: ok(10, 10, 1000*ms)},
			// #5 expired at 1100 ms, costing what it held
			{At: 1100 * ms, N: 1, Budget: reserve(6, strict), Want: deny(10, 0, 900*ms, 900*ms)},
			{At: 1100 * ms, N: 1, Budget: commit(5), Err: sluice.ErrNoReservation},
			{At: 1100 * ms, N: 1, Budget: extend(7, strict), Err: sluice.ErrNoReservation},
			{At: 1100 * ms, N: 11, Budget: reserve(7, bounded), Want: deny(10, 0, sluice.Never, 900*ms)}, // more than the capacity
		}},
		{Name: "token_bucket_budget", Rule: sluice.TokenBucket(10, time.Second, 10), Steps: []Step{
			{At: 0, N: 6, Budget: reserve(1, strict), Want: ok(10, 10, 600*ms)},
			{At: 0, N: 5, Budget: reserve(2, strict), Want: deny(10, 4, 100*ms, 600*ms)},
			{At: 0, N: 5, Budget: reserve(2, bounded), Want: ok(10, 4, 1100*ms)},                  // level 11
			{At: 100 * ms, N: 1, Budget: reserve(3, bounded), Want: deny(10, 0, 100*ms, 1000*ms)}, // level 10
			{At: 100 * ms, N: 9, Budget: commit(2), Want: settled(10, 0, 400*ms, 1400*ms)},        // 4 more: 14
			{At: 100 * ms, N: 0, Budget: commit(1), Want: settled(10, 2, 0, 800*ms)},              // 6 back: 8
			{At: 100 * ms, N: 2, Budget: ttl(reserve(4, strict), 300*ms, true), Want: ok(10, 2, 1000*ms)},
			// 300 ms drained 3 (7 left), and #4 expired free: its 2 back, 5
			{At: 400 * ms, N: 0, Budget: reserve(5, strict), Want: ok(10, 5, 500*ms)},
			{At: 400 * ms, N: 0, Budget: commit(4), Err: sluice.ErrNoReservation},
			{At: 400 * ms, N: 3, Budget: commit(5), Want: settled(10, 2, 0, 800*ms)}, // 3 past its 0
			{At: 400 * ms, N: 1, Budget: reserve(5, strict), Want: ok(10, 2, 900*ms)},
			{At: 400 * ms, N: 1, Budget: reserve(5, strict), Err: sluice.ErrInvalidN}, // already open
			{At: 500 * ms, N: 0, Budget: extend(5, strict), Want: ok(10, 2, 800*ms)},  // a renewal
		}},
		{Name: "sliding_log_budget", Rule: sluice.SlidingLog(3, time.Second), Steps: []Step{
			{At: 0, N: 3, Budget: reserve(1, bounded), Want: ok(3, 3, 1000*ms)},
			{At: 100 * ms, N: 1, Budget: reserve(2, bounded), Want: deny(3, 0, 900*ms, 900*ms)},
			{At: 500 * ms, N: 1, Budget: commit(1), Want: settled(3, 2, 0, 500*ms)}, // 2 of 3 back
			{At: 600 * ms, N: 2, Budget: reserve(2, strict), Want: ok(3, 2, 1000*ms)},
			{At: 1000 * ms, N: 1, Budget: extend(2, strict), Want: ok(3, 1, 1000*ms)}, // the unit at 0 left
			{At: 1500 * ms, N: 0, Budget: commit(2), Want: settled(3, 3, 0, 0)},       // its 3 back
		}},
	}
}

// budgetRules are a rule of each algorithm with capacity c, over an hour (the tests freeze the
// clock).
func budgetRules(c int64) []sluice.Rule {
	var out []sluice.Rule
	for _, a := range sluice.Algorithms() {
		out = append(out, sluice.Rule{Algorithm: a, Limit: c, Period: time.Hour})
	}
	return out
}

// testBudgetBurst: concurrent reservations never all pass on the same remaining budget. On a
// fresh budget of 100 (clock frozen), 32 callers reserving at once: strict reservations of
// 51 admit exactly one; bounded reservations of 30 admit exactly four (the fourth finds 10
// left and takes the key to 120; none after it finds anything left).
func testBudgetBurst(t *testing.T, newStore NewStore, run string) {
	for _, r := range budgetRules(100) {
		for _, c := range []struct {
			mode     sluice.BudgetMode
			n, admit int64
		}{{strict, 51, 1}, {bounded, 30, 4}} {
			t.Run(fmt.Sprintf("%s/%s", r.Algorithm, c.mode), func(t *testing.T) {
				s := newStore(t, sluicetest.NewManualClock(Base))
				key := fmt.Sprintf("storetest:%s:budgetburst:%s:%s", run, r.Algorithm, c.mode)
				var admitted, failed atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				for range 32 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						req := sluice.Request{Key: key, Rule: r, N: c.n, Budget: sluice.BudgetStep{Op: sluice.BudgetReserve, ID: sluice.NewReservationID(), Mode: c.mode}}
						d, err := s.Take(context.Background(), req)
						switch {
						case err != nil:
							failed.Add(1)
						case d.Allowed:
							admitted.Add(1)
						}
					}()
				}
				close(start)
				wg.Wait()
				if failed.Load() != 0 || admitted.Load() != c.admit {
					t.Fatalf("32 concurrent %s reservations of %d on 100: %d admitted (%d failed), want %d", c.mode, c.n, admitted.Load(), failed.Load(), c.admit)
				}
			})
		}
	}
}

// testBudgetConcurrent: 16 callers reserve, extend, commit and abandon reservations of up to 40
// units at once on a budget of 500 (clock frozen): afterwards the key's state counts exactly
// the committed costs plus what the open reservations hold (a peek's Remaining is 500 minus
// that, or 0 in debt), and what was counted at once never passed 500 (strict) or 500 + 39
// (bounded: one step of at most 40 past 499), no commit exceeding its reservation.
func testBudgetConcurrent(t *testing.T, newStore NewStore, run string) {
	const budget, maxN, workers, rounds = 500, 40, 16, 20
	for _, r := range budgetRules(budget) {
		for _, mode := range []sluice.BudgetMode{strict, bounded} {
			t.Run(fmt.Sprintf("%s/%s", r.Algorithm, mode), func(t *testing.T) {
				s := newStore(t, sluicetest.NewManualClock(Base))
				key := fmt.Sprintf("storetest:%s:budgetconc:%s:%s", run, r.Algorithm, mode)
				ctx := context.Background()
				// used: committed + held, which only lags the store's count (an admission is
				// added after it, a commit subtracted before it), so its peak is at most the
				// store's
				var used, peak atomic.Int64
				var errs atomic.Int64
				var wg sync.WaitGroup
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(w), 9))
						step := func(op sluice.BudgetOp, id sluice.ReservationID, n int64) (sluice.Decision, bool) {
							d, err := s.Take(ctx, sluice.Request{Key: key, Rule: r, N: n, Budget: sluice.BudgetStep{Op: op, ID: id, Mode: mode}})
							if err != nil {
								errs.Add(1)
								return d, false
							}
							return d, true
						}
						for range rounds {
							id, n := sluice.NewReservationID(), 1+rng.Int64N(maxN/2)
							d, ok := step(sluice.BudgetReserve, id, n)
							if !ok || !d.Allowed {
								continue
							}
							u := used.Add(n)
							if more := rng.Int64N(maxN - n + 1); more > 0 {
								if d, ok := step(sluice.BudgetExtend, id, more); ok && d.Allowed {
									n += more
									u = used.Add(more)
								}
							}
							for p := peak.Load(); u > p && !peak.CompareAndSwap(p, u); p = peak.Load() {
							}
							if rng.IntN(5) == 0 {
								continue // abandoned: stays open (the clock is frozen)
							}
							actual := rng.Int64N(n + 1)
							used.Add(actual - n)
							step(sluice.BudgetCommit, id, actual)
						}
					}()
				}
				wg.Wait()
				if errs.Load() != 0 {
					t.Fatalf("%d budget steps failed", errs.Load())
				}
				d := budgetPeek(t, s, key, r)
				if want := max(0, budget-used.Load()); d.Remaining != want {
					t.Errorf("after the run: %d remaining, want %d (%d used)", d.Remaining, want, used.Load())
				}
				bound := int64(budget)
				if mode == bounded {
					bound += maxN - 1
				}
				if peak.Load() > bound {
					t.Errorf("%d units held at once, over the %s bound %d", peak.Load(), mode, bound)
				}
			})
		}
	}
}

// testBudgetBadInput: bad budget steps are errors naming the field and move nothing: a
// negative or huge estimate, a TTL longer than the period, an unknown mode, a zero id, a
// budget step that is also a settle; a commit of an unknown, committed or expired
// reservation.
func testBudgetBadInput(t *testing.T, newStore NewStore, run string) {
	clock := sluicetest.NewManualClock(Base)
	s := newStore(t, clock)
	ctx := context.Background()
	rule := sluice.TokenBucket(10, time.Second, 0)
	key := "storetest:" + run + ":budgetbad"
	id := sluice.NewReservationID()
	step := func(op sluice.BudgetOp, id sluice.ReservationID, n int64, f func(*sluice.Request)) error {
		req := sluice.Request{Key: key, Rule: rule, N: n, Budget: sluice.BudgetStep{Op: op, ID: id}}
		if f != nil {
			f(&req)
		}
		_, err := s.Take(ctx, req)
		return err
	}
	if err := step(sluice.BudgetReserve, id, 4, func(r *sluice.Request) { r.Budget.TTL = 100 * ms }); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name, field string
		err         error
		want        error
	}{
		{"negative estimate", "estimate", step(sluice.BudgetReserve, sluice.NewReservationID(), -1, nil), sluice.ErrInvalidN},
		{"huge estimate", "estimate", step(sluice.BudgetReserve, sluice.NewReservationID(), sluice.MaxLimit+1, nil), sluice.ErrInvalidN},
		{"huge extension", "estimate", step(sluice.BudgetExtend, id, sluice.MaxLimit+1, nil), sluice.ErrInvalidN},
		{"negative actual", "actual", step(sluice.BudgetCommit, id, -1, nil), sluice.ErrInvalidN},
		{"huge actual", "actual", step(sluice.BudgetCommit, id, sluice.MaxLimit+1, nil), sluice.ErrInvalidN},
		{"ttl over the period", "ttl", step(sluice.BudgetReserve, sluice.NewReservationID(), 1, func(r *sluice.Request) { r.Budget.TTL = 2 * time.Second }), sluice.ErrInvalidN},
		{"ttl below 1ms", "ttl", step(sluice.BudgetReserve, sluice.NewReservationID(), 1, func(r *sluice.Request) { r.Budget.TTL = time.Microsecond }), sluice.ErrInvalidN},
		{"unknown mode", "mode", step(sluice.BudgetReserve, sluice.NewReservationID(), 1, func(r *sluice.Request) { r.Budget.Mode = 7 }), sluice.ErrInvalidN},
		{"zero id", "id", step(sluice.BudgetReserve, sluice.ReservationID{}, 1, nil), sluice.ErrInvalidN},
		{"settle", "op", step(sluice.BudgetReserve, sluice.NewReservationID(), 1, func(r *sluice.Request) { r.Settle = true }), sluice.ErrInvalidN},
		{"unknown op", "op", step(9, sluice.NewReservationID(), 1, nil), sluice.ErrInvalidN},
		{"bad rule", "limit", step(sluice.BudgetReserve, sluice.NewReservationID(), 1, func(r *sluice.Request) { r.Rule.Limit = 0 }), sluice.ErrInvalidRule},
		{"commit unknown", "id", step(sluice.BudgetCommit, sluice.NewReservationID(), 1, nil), sluice.ErrNoReservation},
		{"extend unknown", "id", step(sluice.BudgetExtend, sluice.NewReservationID(), 1, nil), sluice.ErrNoReservation},
		{"reserve open", "id", step(sluice.BudgetReserve, id, 1, nil), sluice.ErrInvalidN},
	}
	for _, b := range bad {
		var fe *sluice.FieldError
		if !errors.Is(b.err, b.want) || !errors.As(b.err, &fe) || fe.Field != b.field {
			t.Errorf("%s: error %v, want %v naming %q", b.name, b.err, b.want, b.field)
		}
	}
	if d := budgetPeek(t, s, key, rule); d.Remaining != 6 {
		t.Fatalf("after bad input: remaining %d; want 6 (the reservation's 4 held)", d.Remaining)
	}
	if err := step(sluice.BudgetCommit, id, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := step(sluice.BudgetCommit, id, 1, nil); !errors.Is(err, sluice.ErrNoReservation) {
		t.Fatalf("commit twice: %v", err)
	}
	expired := sluice.NewReservationID()
	if err := step(sluice.BudgetReserve, expired, 2, func(r *sluice.Request) { r.Budget.TTL = 10 * ms }); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * ms)
	before := budgetPeek(t, s, key, rule)
	err := step(sluice.BudgetCommit, expired, 0, nil)
	if !errors.Is(err, sluice.ErrNoReservation) || strings.Contains(err.Error(), key) {
		t.Fatalf("commit after expiry: %v (it must not name the key)", err)
	}
	if after := budgetPeek(t, s, key, rule); after != before {
		t.Fatalf("a commit after expiry moved the budget: %+v, then %+v", before, after)
	}
}

// budgetPeek reads a budget key's state with budget steps, a strict reservation of nothing
// (whose decision is a peek's, refused while the key is in debt) and its commit: a store may
// keep a budget key apart from the state its plain requests read (the Redis store
// WithCounters does for the windows).
func budgetPeek(t *testing.T, s sluice.Store, key string, r sluice.Rule) sluice.Decision {
	t.Helper()
	ctx := context.Background()
	id := sluice.NewReservationID()
	d, err := s.Take(ctx, sluice.Request{Key: key, Rule: r, Budget: sluice.BudgetStep{Op: sluice.BudgetReserve, ID: id, Mode: sluice.Strict}})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed {
		return d
	}
	if _, err := s.Take(ctx, sluice.Request{Key: key, Rule: r, Budget: sluice.BudgetStep{Op: sluice.BudgetCommit, ID: id}}); err != nil {
		t.Fatal(err)
	}
	return d
}
