package pipeline

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sluicehq/sluice"
)

// Budgets: a limit with a Budget reserves the request's cost under it (its estimate) once the
// rate limits admit the request, all the budgets together (sluice.Limiter.ReserveAll), and
// commits the real cost after the handler. A budget that refuses denies the request as a rate
// limit does, named in its results, and the rate limits' units are given back.

// addHold adds the hold of budget limit i for the key just written (from q.start), of n
// units.
func (q *Request) addHold(i int, n int64) {
	l := &q.p.limits[i]
	b := *l.Budget
	b.Rule = l.Rule
	q.holdSpans = append(q.holdSpans, [2]int{q.start, len(q.buf)})
	q.holds = append(q.holds, sluice.Hold{Budget: b, N: n})
	q.holdWhich = append(q.holdWhich, i)
	q.mask |= 1 << i
}

// holdKeys sets the holds' keys, cut from the buffer: the reservations outlive the request's
// buffer, so their keys are copied.
func (q *Request) holdKeys() {
	for i := range q.holds {
		if sp := q.holdSpans[i]; q.holds[i].Key == "" {
			q.holds[i].Key = string(q.buf[sp[0]:sp[1]])
		}
	}
}

// reserve reserves q's budgets with l; denied reports a budget that refused. The rate checks
// already charged (when the request is refused) are given back.
func (q *Request) reserve(ctx context.Context, l *sluice.Limiter) (denied bool, err error) {
	rs, err := l.ReserveAll(ctx, q.holds)
	if err != nil {
		return false, err
	}
	q.resv, q.reserved = rs, true
	if !rs.Decision.Allowed {
		q.refundChecks(ctx, l)
		return true, nil
	}
	return false, nil
}

// refundChecks gives back what the rate checks took, for a request a budget refused.
func (q *Request) refundChecks(ctx context.Context, l *sluice.Limiter) {
	for i := range q.checks {
		c := &q.checks[i]
		if c.Decision.Allowed && c.N > 0 {
			_, _ = l.AllowN(context.WithoutCancel(ctx), c.Key, c.Rule, -c.N)
		}
	}
}

// budgetResults appends a result per budget reserved: its decision, whose Remaining is what
// the budget had left when the request came (sluice.Reservation), so that the remaining a
// client sees falls after each response by what it cost, not by what it was estimated at.
func (q *Request) budgetResults(results []Result) []Result {
	for i := range q.resv.Holds {
		r := &q.resv.Holds[i]
		results = append(results, Result{Name: q.p.limits[q.holdWhich[i]].Name, Rule: r.Budget.Rule, Decision: r.Decision})
	}
	return results
}

// Reservations returns the request's budget reservations once Decide admitted it (nil when it
// has none): a transport that meters the response (budget.Meter) commits them itself.
func (q *Request) Reservations() *sluice.Reservations {
	if !q.reserved || !q.resv.Decision.Allowed {
		return nil
	}
	return &q.resv
}

// Commit ends the request's budget reservations at real units each, and sets each budget's
// result to its commit's decision (its remaining after the cost). A reservation already ended
// (by a Meter) is left as it is. ctx should outlive the client's request. A commit that fails
// is counted (SettleErrors) and logged as a store error.
func (q *Request) Commit(ctx context.Context, real int64) {
	rs := q.Reservations()
	if rs == nil {
		return
	}
	for i := range rs.Holds {
		r := &rs.Holds[i]
		d, err := r.Commit(ctx, min(max(real, 0), sluice.MaxLimit))
		if err != nil {
			if !errors.Is(err, sluice.ErrNoReservation) || r.Held > 0 {
				q.commitFailed(q.holdWhich[i], err)
			}
			continue
		}
		r.Decision = d
	}
	q.results = q.results[:0] // Results again, from the commits
}

// commitHeld commits every reservation still open at what it holds (the estimate stands): a
// request whose real cost nobody reported.
func (q *Request) commitHeld(ctx context.Context) {
	rs := q.Reservations()
	if rs == nil {
		return
	}
	for i := range rs.Holds {
		r := &rs.Holds[i]
		if _, err := r.Commit(ctx, r.Held); err != nil && !errors.Is(err, sluice.ErrNoReservation) {
			q.commitFailed(q.holdWhich[i], err)
		}
	}
}

func (q *Request) commitFailed(limit int, err error) {
	p := q.p
	if s := p.stats; s != nil {
		s.SettleErrors.Add(1)
	}
	p.warn(&p.storeLog, p.cfg.Name+": the store could not commit a budget reservation; it costs what it held",
		slog.String("policy", p.limits[limit].Name), slog.String("err", withoutKey(err).Error()))
}

// cancelBudgets gives back the reservations of a request refused after them (an in-flight
// limit refused it, or its store failed).
func (q *Request) cancelBudgets(ctx context.Context) {
	if rs := q.Reservations(); rs != nil {
		_, _ = rs.Cancel(context.WithoutCancel(ctx))
	}
}

// combined is the decision of the rate checks and the reservations together (sluice.Combine).
func (q *Request) combined(allowed bool) sluice.Decision {
	if len(q.checks) == 0 {
		d := q.resv.Decision
		d.Allowed = allowed
		return d
	}
	all := make([]sluice.Check, 0, len(q.checks)+len(q.resv.Holds))
	all = append(all, q.checks...)
	for i := range q.resv.Holds {
		all = append(all, sluice.Check{Decision: q.resv.Holds[i].Decision})
	}
	d, _ := sluice.Combine(all, allowed)
	return d
}

// decideBudgets reserves q's budgets once its rate limits admitted it (step 4 of Decide), on
// the limiter that charged the checks (the fallback under FailLocal), and fills in o; done
// reports a final answer: Deny when a budget refuses (the rate checks given back), or the
// failure policy's when the store fails (a request let through runs without its budgets).
func (q *Request) decideBudgets(ctx context.Context, o *Outcome) (Answer, bool) {
	p := q.p
	q.holdKeys()
	l := q.charged
	if l == nil || len(q.checks) == 0 {
		l = p.cfg.Limiter
	}
	denied, err := q.reserve(ctx, l)
	if err != nil {
		v, cause, local := q.fail(ctx, err, -1)
		if !local {
			o.Err = cause
			return v, v != Pass
		}
		if denied, err = q.reserve(ctx, p.cfg.Local); err != nil {
			if s := p.stats; s != nil {
				s.FailedOpen.Add(1)
			}
			return Pass, false
		}
	}
	o.Decided, o.Decision = true, q.combined(!denied)
	if !denied {
		return Pass, false
	}
	if s := p.stats; s != nil {
		s.Denied.Add(1)
	}
	return Deny, true
}

// BudgetLimits returns the limits of q's budgets, in the order of its reservations' holds.
func (q *Request) BudgetLimits() []int { return q.holdWhich }

// BudgetChecks returns q's budgets as checks (key, rule, the reservation's decision), for a
// transport that writes its denial from checks (grpclimit).
func (q *Request) BudgetChecks() []sluice.Check {
	if len(q.resv.Holds) == 0 {
		return nil
	}
	out := make([]sluice.Check, len(q.resv.Holds))
	for i := range q.resv.Holds {
		r := &q.resv.Holds[i]
		out[i] = sluice.Check{Key: r.Key, Rule: r.Budget.Rule, N: q.holds[i].N, Decision: r.Decision}
	}
	return out
}
