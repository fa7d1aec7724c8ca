package rls

import (
	"context"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// The key form of budgets (server: POST /v1/reserve, /v1/commit, /v1/cancel): a reservation of
// an estimate on key under every rule of a limit (each rule a budget, the second and later
// under key + "|#N", as DecideKey counts them), committed later, by id, in this process or
// another (sluice.Limiter.ReserveAll and ResumeAll). A transport checks the request as for
// DecideKey.

// ReserveKey reserves estimate units of key on every rule of lim, each a budget of mode, TTL
// and expiry b (b.Rule is ignored): all must admit (see sluice.Limiter.ReserveAll). A limit
// without rules (unlimited) admits with Limit and Remaining -1, holding nothing. Errors are
// DecideKey's; bad input names its field ("estimate", "ttl").
func (e *Engine) ReserveKey(ctx context.Context, key string, lim *config.Limit, estimate int64, b sluice.Budget) (sluice.Reservations, error) {
	holds := budgetHolds(key, lim, estimate, b)
	if len(holds) == 0 {
		return sluice.Reservations{Decision: unlimitedKey, Denied: -1}, nil
	}
	rs, err := e.budgetLimiter(holds).ReserveAll(ctx, holds)
	if err != nil {
		return rs, e.storeError(ctx, err)
	}
	return rs, nil
}

// CommitKey ends reservation id of key on lim's rules at its real cost, actual units on each
// (sluice.Reservations.Commit; 0 cancels). A reservation not open (unknown, committed, expired)
// is an invalid request naming "id" that moved nothing.
func (e *Engine) CommitKey(ctx context.Context, key string, lim *config.Limit, id sluice.ReservationID, actual int64) (sluice.Decision, error) {
	holds := budgetHolds(key, lim, 0, sluice.Budget{})
	if len(holds) == 0 {
		return unlimitedKey, nil
	}
	costs := make([]int64, len(holds))
	for i := range costs {
		costs[i] = actual
	}
	rs := e.budgetLimiter(holds).ResumeAll(id, holds)
	d, err := rs.Commit(ctx, costs...)
	if err != nil {
		return sluice.Decision{}, e.storeError(ctx, err)
	}
	return d, nil
}

// budgetHolds returns the holds of key on lim's rules.
func budgetHolds(key string, lim *config.Limit, n int64, b sluice.Budget) []sluice.Hold {
	holds := make([]sluice.Hold, len(lim.Rules))
	for i, r := range lim.Rules {
		b.Rule = r
		holds[i] = sluice.Hold{Key: checkKey(lim, key, i), Budget: b, N: n}
	}
	return holds
}

// budgetLimiter is limiterFor of holds.
func (e *Engine) budgetLimiter(holds []sluice.Hold) *sluice.Limiter {
	checks := make([]sluice.Check, len(holds))
	for i := range holds {
		checks[i].Key = holds[i].Key
	}
	return e.limiterFor(checks)
}
