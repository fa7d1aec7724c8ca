package gate

import (
	"context"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rls"
)

// Budgets: the proxy sections' budgets (config.ProxyBudget) of the request a Scratch
// describes. The gate keys them with their actions, as it keys rate limits, and reserves a
// request's estimate on all of them at once; the door that holds the request's body and its
// response (sluice proxy) estimates each and meters the response (package budget). The
// gateways' doors do not reserve: they see neither the body nor the response.

// Budget is a budget of a proxy section that keys a request: the compiled budget and the
// request's store key under it ("budget:" domain ":" name, then ":" key "=" value per entry
// of its actions).
type Budget struct {
	*config.Budget
	Key string
}

// Budgets returns the budgets that key sc's request in the domains with a proxy section (or
// domain alone when not empty), in order; none when no budget's actions all have a value.
// The slice is sc's: valid until Release.
func (g *Gate) Budgets(sc *Scratch, domain string) []Budget {
	sc.budgets = sc.budgets[:0]
	for _, d := range g.currentPlan().domains {
		if domain != "" && d.Name != domain {
			continue
		}
		for _, b := range d.Budgets {
			if sc.fields.r != &sc.Request {
				sc.fields = requestFields{r: &sc.Request, resolver: g.resolver}
			}
			desc := &sc.budgetDesc
			desc.Entries = desc.Entries[:0]
			if !appendEntries(desc, &sc.fields, b.Actions) {
				continue
			}
			var k strings.Builder
			k.WriteString("budget:" + d.Name + ":" + b.Name)
			for _, e := range desc.Entries {
				k.WriteString(":" + e.Key + "=" + e.Value)
			}
			sc.budgets = append(sc.budgets, Budget{Budget: b, Key: k.String()})
		}
	}
	return sc.budgets
}

// Reserve reserves n[i] units of budgets[i] (Budgets) for sc's request, all or none
// (sluice.Limiter.ReserveAll), before its rate limits are decided. Pass: every budget holds
// its units (the reservations returned: commit or cancel them); Denied: one refused, and
// sc.Results holds the budgets' results, that one denied, for Write (429 naming it, with
// Retry-After until it frees); Invalid or Unavailable: the store refused a key or failed
// (sc.Err), nothing held.
func (g *Gate) Reserve(ctx context.Context, sc *Scratch, budgets []Budget, n []int64) (sluice.Reservations, Outcome) {
	holds := make([]sluice.Hold, len(budgets))
	for i, b := range budgets {
		holds[i] = sluice.Hold{Key: b.Key, Budget: b.Budget.Budget, N: n[i]}
	}
	rs, err := g.eng.Limiter().ReserveAll(ctx, holds)
	switch {
	case err != nil:
		sc.Err = g.eng.StoreError(ctx, err)
		if rls.KindOf(sc.Err) == rls.KindInvalid {
			return rs, Invalid
		}
		return rs, Unavailable
	case !rs.Decision.Allowed:
		sc.Results = BudgetResults(sc.Results, budgets, &rs)
		return rs, Denied
	}
	return rs, Pass
}

// BudgetResults appends a result per reservation of rs, made by Reserve on budgets: the
// reservation's decision under the budget's name, whose Remaining is what the budget had left
// when the request came (sluice.Reservation), so that it falls after each response by what
// the response cost.
func BudgetResults(results []httplimit.Result, budgets []Budget, rs *sluice.Reservations) []httplimit.Result {
	for i := range rs.Holds {
		r := &rs.Holds[i]
		results = append(results, httplimit.Result{Name: budgets[i].Name, Rule: r.Budget.Rule, Decision: r.Decision})
	}
	return results
}
