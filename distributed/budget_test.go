package distributed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// budgetStep decides budget step op of n units on reservation id, key "b", under rule on s.
func budgetStep(t *testing.T, s sluice.Store, rule sluice.Rule, op sluice.BudgetOp, id sluice.ReservationID, n int64) (sluice.Decision, error) {
	t.Helper()
	return s.Take(context.Background(), sluice.Request{Key: "b", Rule: rule, N: n, Budget: sluice.BudgetStep{Op: op, ID: id, Mode: sluice.Strict}})
}

// TestDecoratorsPassBudgetSteps: every decorator passes a budget step to its store, which holds
// the reservation: the async view decides none locally (a window rule's included), the
// over-limit cache answers none from a cached denial.
func TestDecoratorsPassBudgetSteps(t *testing.T) {
	rule := sluice.FixedWindow(10, time.Minute)
	clock := sluicetest.NewManualClock(t0)
	for name, wrap := range map[string]func(sluice.Store) sluice.Store{
		"async":     func(s sluice.Store) sluice.Store { return newAsync(t, s, WithClock(clock), WithInterval(time.Hour)) },
		"overlimit": func(s sluice.Store) sluice.Store { o, _ := NewOverLimit(s, WithClock(clock)); return o },
	} {
		t.Run(name, func(t *testing.T) {
			store := newMemory(t, clock)
			s := wrap(store)
			a, b := sluice.NewReservationID(), sluice.NewReservationID()
			if d, err := budgetStep(t, s, rule, sluice.BudgetReserve, a, 8); err != nil || !d.Allowed {
				t.Fatalf("reserve 8: %+v %v", d, err)
			}
			if d, err := budgetStep(t, s, rule, sluice.BudgetReserve, b, 5); err != nil || d.Allowed {
				t.Fatalf("reserve 5 with 2 left: %+v %v", d, err)
			}
			if d, err := budgetStep(t, s, rule, sluice.BudgetCommit, a, 3); err != nil || d.Remaining != 7 {
				t.Fatalf("commit 3 of 8: %+v %v", d, err)
			}
			// the store itself counts it: the decorator kept nothing of its own
			if d, err := budgetStep(t, store, rule, sluice.BudgetReserve, b, 7); err != nil || !d.Allowed || d.Remaining != 7 {
				t.Fatalf("the store after the commit: %+v %v", d, err)
			}
		})
	}
}

// TestFallbackBudgetSteps: while the store is out, a Fallback applies its policy to budget
// steps: fail open admits a reservation holding nothing, fail closed refuses it, fail local
// decides it on the local limiter's share; a commit is answered as applied (its cost lost
// with the outage) unless the local limiter holds the reservation.
func TestFallbackBudgetSteps(t *testing.T) {
	rule := sluice.FixedWindow(10, time.Minute)
	for _, c := range []struct {
		policy  FailurePolicy
		reserve bool
	}{{FailOpen, true}, {FailClosed, false}, {FailLocal, true}} {
		t.Run(c.policy.String(), func(t *testing.T) {
			_, flaky, f := manualFallback(t, WithFailures(1), WithFailurePolicy(c.policy), WithSafeCapacity(1))
			held := sluice.NewReservationID()
			if d, err := budgetStep(t, f, rule, sluice.BudgetReserve, held, 4); err != nil || !d.Allowed {
				t.Fatalf("reserve on the store: %+v %v", d, err)
			}
			flaky.SetFailing(true)
			id := sluice.NewReservationID()
			d, err := budgetStep(t, f, rule, sluice.BudgetReserve, id, 4)
			if err != nil || d.Allowed != c.reserve {
				t.Fatalf("reserve while out: %+v %v, want allowed %v", d, err, c.reserve)
			}
			if c.policy == FailLocal {
				if d, err := budgetStep(t, f, rule, sluice.BudgetReserve, sluice.NewReservationID(), 7); err != nil || d.Allowed {
					t.Fatalf("a second local reservation of 7 past the local 10: %+v %v", d, err)
				}
				if d, err := budgetStep(t, f, rule, sluice.BudgetCommit, id, 1); err != nil || d.Remaining != 9 {
					t.Fatalf("the local reservation's commit: %+v %v", d, err)
				}
			}
			if d, err := budgetStep(t, f, rule, sluice.BudgetCommit, held, 1); err != nil || !d.Allowed {
				t.Fatalf("commit of the store's reservation while out: %+v %v", d, err)
			}
			if _, err := budgetStep(t, f, rule, sluice.BudgetCommit, sluice.ReservationID{}, 1); !errors.Is(err, sluice.ErrInvalidN) {
				t.Fatalf("bad input while out: %v", err)
			}
		})
	}
}
