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

// TTLFor returns the TTL of b's reservations: TTL, or the rule's period when TTL is 0, in whole
// milliseconds.
func (b Budget) TTLFor() time.Duration { return BudgetStep{TTL: b.TTL}.TTLFor(b.Rule) }

// Reservation is units held on one budget for one request, from Limiter.Reserve until Commit
// or Cancel (or its TTL). It is a small value; its methods update Held and mark it ended, so
// call them on one copy. It is not safe for concurrent use. After the first Commit or Cancel
// its methods fail with ErrNoReservation, as the store answers for a reservation no longer
// open.
type Reservation struct {
	// Decision is the reserve's: Allowed when admitted; when refused, RetryAfter until the
	// budget has room (Never for more than its capacity). Its Remaining is what the budget
	// had left when the reservation came, its own units not counted: the remaining to show a
	// client, which falls after each response by what the response cost (what is left now is
	// Remaining - Held, at least 0).
	Decision Decision
	// ID names the reservation in the store.
	ID ReservationID
	// Key and Budget are the reservation's.
	Key    string
	Budget Budget
	// Held is what the reservation holds: its N and the extensions admitted since (0 when
	// refused).
	Held int64

	store Store
	ended bool
}

// Reserve holds n units of budget b on key, the estimate of a request's cost (or its stated
// maximum), before the work, for a cost known only after it: LLM tokens, bytes, money. The
// hold is one atomic step in the store (Request.Budget): the units count against the budget
// at once, so concurrent requests never all pass on the same remaining budget. A Bounded
// budget admits while it is not spent, overshooting by at most one request's held units at
// any concurrency; a Strict one admits only what fits. After the work, Commit the real cost
// (or Cancel); a reservation never committed expires after its TTL and then costs what it held
// (or nothing, FreeOnExpiry). ReserveAll holds several budgets at once.
//
// A refusal is a Reservation whose Decision is not Allowed, not an error; errors are for bad
// input (a *FieldError naming the field: "estimate" for a negative or huge n, "ttl", "mode")
// and an unavailable store. It allocates nothing on the memory store.
func (l *Limiter) Reserve(ctx context.Context, key string, b Budget, n int64) (Reservation, error) {
	r := Reservation{ID: NewReservationID(), Key: key, Budget: b, store: l.store}
	if l.store == nil {
		return r, ErrNoStore
	}
	d, err := r.step(ctx, BudgetReserve, n)
	if err != nil {
		return r, err
	}
	r.Decision = d
	if d.Allowed {
		r.Held = n
	} else {
		r.ended = true
	}
	return r, nil
}

// Resume returns a handle on reservation id of key's budget b, made by Reserve here or in
// another process (a gateway that reserves before the call and commits after it, through the
// service's HTTP API), to extend, commit or cancel it. Its Decision and Held are zero.
func (l *Limiter) Resume(id ReservationID, key string, b Budget) Reservation {
	return Reservation{ID: id, Key: key, Budget: b, store: l.store}
}

// step sends budget step op of n units.
func (r *Reservation) step(ctx context.Context, op BudgetOp, n int64) (Decision, error) {
	return r.store.Take(ctx, Request{Key: r.Key, Rule: r.Budget.Rule, N: n, Budget: BudgetStep{
		Op: op, ID: r.ID, TTL: r.Budget.TTL, Mode: r.Budget.Mode, FreeOnExpiry: r.Budget.FreeOnExpiry}})
}

// check reports an ended reservation.
func (r *Reservation) check() error {
	switch {
	case r.store == nil:
		return ErrNoStore
	case r.ended:
		return fieldError(ErrNoReservation, "id", "not open (committed, cancelled or refused)")
	}
	return nil
}

// Extend holds n more units, for a cost running past what the reservation holds (a stream
// metered as it flows: budget.Meter), admitted by the budget's mode as a reservation of n would
// be, and starts the reservation's TTL again; n = 0 only renews the TTL. A refusal is a
// Decision with Allowed false, holding nothing more: the work should stop there.
func (r *Reservation) Extend(ctx context.Context, n int64) (Decision, error) {
	if err := r.check(); err != nil {
		return Decision{}, err
	}
	d, err := r.step(ctx, BudgetExtend, n)
	if err == nil && d.Allowed {
		r.Held = min(r.Held+n, 1<<50)
	}
	return d, err
}

// Commit ends the reservation at its real cost, actual units (0 to MaxLimit), and it holds
// nothing more (Held 0): what it held beyond the cost is given back (while the budget's state still counts it), what it exceeds it by
// is charged even past the limit, as Limiter.Settle charges. The Decision is allowed, with
// Remaining 0 and RetryAfter until the debt is paid while the budget is in debt. A reservation
// that expired fails with ErrNoReservation, having cost what it held (or nothing).
func (r *Reservation) Commit(ctx context.Context, actual int64) (Decision, error) {
	if err := r.check(); err != nil {
		return Decision{}, err
	}
	r.ended = true
	d, err := r.step(ctx, BudgetCommit, actual)
	r.Held = 0
	return d, err
}

// Cancel ends the reservation at no cost: the work did not happen. It is Commit of 0.
func (r *Reservation) Cancel(ctx context.Context) (Decision, error) { return r.Commit(ctx, 0) }

// Hold is one budget of a request that holds several (ReserveAll): Budget on Key, N units.
type Hold struct {
	Key    string
	Budget Budget
	N      int64
}

// Reservations are the reservations of one request on several budgets (ReserveAll): tokens per
// minute and dollars per month, say. They are not safe for concurrent use.
type Reservations struct {
	// Decision combines the reservations' decisions (see Combine): admitted if every one
	// was; the binding one's Limit and Remaining; when refused, the RetryAfter of the one
	// that refused (Denied), when it frees.
	Decision Decision
	// Denied is the index of the budget that refused, -1 when admitted.
	Denied int
	// Holds are the reservations, one per budget in order (those after Denied not made).
	Holds []Reservation
}

// ReserveAll reserves every hold for one request, all or none: the holds are reserved in
// order, under one id, and when one refuses, those before it are cancelled and Denied names
// it. Holds name distinct keys. Errors are Reserve's, after which nothing stays held.
func (l *Limiter) ReserveAll(ctx context.Context, holds []Hold) (Reservations, error) {
	rs := Reservations{Denied: -1}
	if len(holds) == 0 {
		return rs, fieldError(ErrInvalidN, "holds", "empty")
	}
	for i := range holds {
		for j := range i {
			if holds[j].Key == holds[i].Key {
				return rs, fieldError(ErrInvalidKey, "key", "holds %d and %d name one key: each budget needs its own", j, i)
			}
		}
	}
	id := NewReservationID()
	rs.Holds = make([]Reservation, 0, len(holds))
	for i, h := range holds {
		r := Reservation{ID: id, Key: h.Key, Budget: h.Budget, store: l.store}
		if l.store == nil {
			return Reservations{Denied: -1}, ErrNoStore
		}
		d, err := r.step(ctx, BudgetReserve, h.N)
		if err != nil {
			rs.cancel()
			return Reservations{Denied: -1}, err
		}
		r.Decision = d
		if !d.Allowed {
			r.ended = true
			rs.cancel()
			rs.Denied = i
			rs.Holds = append(rs.Holds, r)
			break
		}
		r.Held = h.N
		rs.Holds = append(rs.Holds, r)
	}
	rs.Decision, _ = combine(len(rs.Holds), func(i int) *Decision { return &rs.Holds[i].Decision }, rs.Denied < 0)
	return rs, nil
}

// ResumeAll is Resume for the reservations of ReserveAll (one id, the same holds in order).
func (l *Limiter) ResumeAll(id ReservationID, holds []Hold) Reservations {
	rs := Reservations{Denied: -1, Holds: make([]Reservation, len(holds))}
	for i, h := range holds {
		rs.Holds[i] = l.Resume(id, h.Key, h.Budget)
	}
	return rs
}

// cancel gives back the reservations held (best effort: they expire otherwise), with a
// context of its own, as the caller's may be done.
func (rs *Reservations) cancel() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i := range rs.Holds {
		if !rs.Holds[i].ended {
			_, _ = rs.Holds[i].Cancel(ctx)
		}
	}
}

// Commit ends every reservation at its real cost, one per hold in order (see
// Reservation.Commit). The Decision combines the commits': allowed, the binding budget's Limit
// and Remaining and the longest RetryAfter (until every debt is paid). Every reservation is
// committed even when one fails; the error joins their errors.
func (rs *Reservations) Commit(ctx context.Context, actual ...int64) (Decision, error) {
	if len(actual) != len(rs.Holds) {
		return Decision{}, fieldError(ErrInvalidN, "actual", "%d costs for %d holds", len(actual), len(rs.Holds))
	}
	var errs []error
	ds := make([]Decision, len(rs.Holds))
	for i := range rs.Holds {
		d, err := rs.Holds[i].Commit(ctx, actual[i])
		if err != nil {
			if len(rs.Holds) > 1 {
				err = fmt.Errorf("hold %d: %w", i, err)
			}
			errs = append(errs, err)
		}
		ds[i] = d
	}
	d, _ := combine(len(ds), func(i int) *Decision { return &ds[i] }, true)
	for i := range ds {
		d.RetryAfter = max(d.RetryAfter, ds[i].RetryAfter)
	}
	return d, errors.Join(errs...)
}

// Cancel ends every reservation at no cost (Commit of 0 each).
func (rs *Reservations) Cancel(ctx context.Context) (Decision, error) {
	return rs.Commit(ctx, make([]int64, len(rs.Holds))...)
}
