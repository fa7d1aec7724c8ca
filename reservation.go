package sluice

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Budget is a limit on a cost known only after the work (see Limiter.Reserve): Rule's capacity,
// spent by what the requests on a key really cost. It is plain data; its zero Mode is Bounded.
type Budget struct {
	// Rule is the budget: Limit units per Period, under any algorithm (a fixed or sliding
	// window for "so much per minute", any for a rolling window of money).
	Rule Rule
	// Mode admits a reservation: Bounded (while the budget is not spent) or Strict (only
	// what fits).
	Mode BudgetMode
	// TTL is how long a reservation lives without a commit or an extension: 0 means the
	// rule's period (see BudgetStep.TTL).
	TTL time.Duration
	// FreeOnExpiry makes a reservation that expires uncommitted cost nothing; by default it
	// costs what it held (see BudgetStep.FreeOnExpiry).
	FreeOnExpiry bool
}

// Hold is one budget of a reservation: Budget on Key, holding N units (the request's estimate,
// or its stated maximum) until the commit.
type Hold struct {
	Key    string
	Budget Budget
	N      int64
}

// Reservation is what Limiter.Reserve holds for one request on one or more budgets, until
// Commit or Cancel (or its TTL). Decision says whether it was admitted. A Reservation is not
// safe for concurrent use; its methods after the first Commit or Cancel fail with
// ErrNoReservation, as the store answers for a reservation no longer open.
type Reservation struct {
	// Decision combines the holds' decisions (see Combine): admitted if every hold was; the
	// binding hold's Limit and Remaining; when refused, the RetryAfter of the hold that
	// refused (Denied), when it frees.
	Decision Decision
	// Denied is the index of the hold that refused the reservation, -1 when admitted.
	Denied int
	// Decisions are the holds' own decisions (the holds after Denied are not decided).
	Decisions []Decision

	store Store
	id    ReservationID
	holds []Hold // N: what each holds now (extensions added)
	ended bool
}

// ID returns the reservation's id, the same on every hold's key.
func (r *Reservation) ID() ReservationID { return r.id }

// Held returns what hold i holds now: its N and the extensions admitted since.
func (r *Reservation) Held(i int) int64 { return r.holds[i].N }

// Holds returns the number of holds.
func (r *Reservation) Holds() int { return len(r.holds) }

// TTL returns how long the reservation lives without an extension: its shortest hold's TTL
// (BudgetStep.TTLFor).
func (r *Reservation) TTL() time.Duration {
	var ttl time.Duration
	for i, h := range r.holds {
		t := BudgetStep{TTL: h.Budget.TTL}.TTLFor(h.Budget.Rule)
		if i == 0 || t < ttl {
			ttl = t
		}
	}
	return ttl
}

// Reserve holds an estimate of a request's cost on every budget of holds, before the work, for
// a cost known only after it: LLM tokens, bytes, money. Each hold is one atomic step in the
// store (sluice.Request.Budget): the units count against the budget at once, so concurrent
// requests never all pass on the same remaining budget. A Bounded budget admits while it is
// not spent, overshooting by at most one request's held units at any concurrency; a Strict
// one admits only what fits. All holds must admit; when one refuses, the holds before it are
// cancelled and Reservation.Denied names it, with RetryAfter when it frees. After the work,
// Commit the real costs (or Cancel); a reservation never committed expires after its TTL and
// then costs what it held (or nothing, FreeOnExpiry).
//
// Holds name distinct keys. A refusal is a Reservation with Decision.Allowed false, not an
// error; errors are for bad input (a *FieldError naming the field: "estimate" for a negative
// or huge N, "ttl", "mode", "key") and an unavailable store, after which nothing stays held.
func (l *Limiter) Reserve(ctx context.Context, holds ...Hold) (*Reservation, error) {
	if l.store == nil {
		return nil, ErrNoStore
	}
	if len(holds) == 0 {
		return nil, fieldError(ErrInvalidN, "holds", "empty")
	}
	for i := range holds {
		for j := range i {
			if holds[j].Key == holds[i].Key {
				return nil, fieldError(ErrInvalidKey, "key", "holds %d and %d name one key: each budget needs its own", j, i)
			}
		}
	}
	r := &Reservation{store: l.store, id: NewReservationID(), holds: append([]Hold(nil), holds...), Denied: -1,
		Decisions: make([]Decision, len(holds))}
	for i := range r.holds {
		d, err := r.step(ctx, i, BudgetReserve, r.holds[i].N)
		if err != nil {
			r.cancel(i)
			return nil, err
		}
		r.Decisions[i] = d
		if !d.Allowed {
			r.Denied = i
			r.cancel(i)
			r.ended = true
			break
		}
	}
	r.Decision = r.combine(r.Denied < 0)
	return r, nil
}

// Resume returns a handle on reservation id, made by Reserve here or in another process (a
// gateway that reserves before the call and commits after it, through the service's HTTP
// API), over the same holds in the same order, to extend, commit or cancel it. Its Decision is
// the zero Decision and Held reports the holds' N as given.
func (l *Limiter) Resume(id ReservationID, holds ...Hold) *Reservation {
	return &Reservation{store: l.store, id: id, holds: append([]Hold(nil), holds...), Denied: -1}
}

// step sends budget step op of n units for hold i.
func (r *Reservation) step(ctx context.Context, i int, op BudgetOp, n int64) (Decision, error) {
	h := &r.holds[i]
	return r.store.Take(ctx, Request{Key: h.Key, Rule: h.Budget.Rule, N: n, Budget: BudgetStep{
		Op: op, ID: r.id, TTL: h.Budget.TTL, Mode: h.Budget.Mode, FreeOnExpiry: h.Budget.FreeOnExpiry}})
}

// cancel gives back the holds before i (best effort: their reservations expire otherwise),
// with a context of its own, as the caller's may be done.
func (r *Reservation) cancel(i int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for j := range i {
		_, _ = r.step(ctx, j, BudgetCommit, 0)
	}
}

// combine is the decision of the holds decided so far (see Combine).
func (r *Reservation) combine(allowed bool) Decision {
	n := len(r.holds)
	if r.Denied >= 0 {
		n = r.Denied + 1
	}
	checks := make([]Check, n)
	for i := range checks {
		checks[i].Decision = r.Decisions[i]
	}
	d, _ := Combine(checks, allowed)
	return d
}

// Extend holds n more units on hold i, for a cost running past what the reservation holds (a
// stream metered as it flows: budget.Meter), admitted by the hold's mode as a reservation of n
// would be, and starts the reservation's TTL again; n = 0 only renews the TTL. A refusal is a
// Decision with Allowed false, holding nothing more: the work should stop there.
func (r *Reservation) Extend(ctx context.Context, i int, n int64) (Decision, error) {
	if err := r.check(i); err != nil {
		return Decision{}, err
	}
	d, err := r.step(ctx, i, BudgetExtend, n)
	if err == nil && d.Allowed {
		r.holds[i].N = min(r.holds[i].N+n, 1<<50)
	}
	return d, err
}

// Commit ends the reservation at its real costs, one per hold in order: what a hold held beyond
// its cost is given back (while the budget's state still counts it), what the cost exceeds it
// by is charged even past the limit, as Limiter.Settle charges. The Decision is allowed, with
// the binding hold's Limit and Remaining and, while a budget is in debt, RetryAfter until it
// is paid. Every hold is committed even when one fails; the error joins their errors (a hold
// whose reservation expired fails with ErrNoReservation, having cost what it held).
func (r *Reservation) Commit(ctx context.Context, actual ...int64) (Decision, error) {
	if len(actual) != len(r.holds) {
		return Decision{}, fieldError(ErrInvalidN, "actual", "%d costs for %d holds", len(actual), len(r.holds))
	}
	return r.end(ctx, actual)
}

// Cancel ends the reservation at no cost: the work did not happen (or the caller will not say
// what it cost). It is Commit with every cost 0.
func (r *Reservation) Cancel(ctx context.Context) (Decision, error) {
	return r.end(ctx, make([]int64, len(r.holds)))
}

func (r *Reservation) end(ctx context.Context, actual []int64) (Decision, error) {
	if err := r.check(0); err != nil {
		return Decision{}, err
	}
	r.ended = true
	checks := make([]Check, len(r.holds))
	var errs []error
	for i := range r.holds {
		d, err := r.step(ctx, i, BudgetCommit, actual[i])
		if err != nil && len(r.holds) > 1 {
			err = fmt.Errorf("hold %d: %w", i, err)
		}
		errs = append(errs, err)
		checks[i].Decision = d
	}
	d, _ := Combine(checks, true)
	for _, c := range checks {
		d.RetryAfter = max(d.RetryAfter, c.Decision.RetryAfter)
	}
	return d, errors.Join(errs...)
}

// check reports an ended reservation, or a hold out of range.
func (r *Reservation) check(i int) error {
	switch {
	case r.store == nil:
		return ErrNoStore
	case r.ended:
		return fieldError(ErrNoReservation, "id", "not open (committed, cancelled or refused)")
	case i < 0 || i >= len(r.holds):
		return fieldError(ErrInvalidN, "hold", "%d of %d holds", i, len(r.holds))
	}
	return nil
}
