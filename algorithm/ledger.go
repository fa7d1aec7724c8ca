package algorithm

import (
	"errors"
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// Reservation is one open reservation of a budget key (sluice.Request.Budget).
type Reservation struct {
	// ID names it.
	ID sluice.ReservationID
	// Held is what it has charged the budget: its reserve and its extensions.
	Held int64
	// Counted is the part of Held the state still counts, which a commit (or a free expiry)
	// may give back: 0 once the charges have left the state (now >= Until).
	Counted int64
	// Until is the instant (Unix ns) at which its last charge leaves the state (ChargeLife):
	// the end of a fixed window, of the sliding window that still weighs it, of a sliding
	// log's period; never (math.MaxInt64) for the draining algorithms, whose refund at any
	// later time is exact.
	Until int64
	// Expires is the instant (Unix ns, whole ms) at which it expires uncommitted.
	Expires int64
	// Free makes expiring cost nothing (sluice.BudgetStep.FreeOnExpiry).
	Free bool
}

// maxHeld bounds Held and Counted (2^50 units): every value stays exact in the doubles of the
// Redis scripts.
const maxHeld = 1 << 50

// Ledger is a budget key's state: the algorithm's State and the key's open reservations, which
// a store keeps and changes together in one atomic step. It implements State by passing Take
// and Settle to the algorithm's (an ordinary request on a budget key, such as a peek, sees the
// held units like any others); Apply decides the budget steps on it. The Redis scripts keep
// the same ledger beside the state (store/redis/lua/budget.lua).
type Ledger struct {
	State State
	Open  []Reservation
	// soonest is at most the soonest expiry of Open (0: unknown), so that a step scans the
	// reservations for expired ones only when one may be (a key may hold 10,000).
	soonest int64
}

// WithLedger returns s as a Ledger: s itself when it is one, else a Ledger of s with no open
// reservation. A store that keeps a State per key calls it for a budget step (see Apply).
func WithLedger(s State) *Ledger {
	if l, ok := s.(*Ledger); ok {
		return l
	}
	return &Ledger{State: s}
}

// Take implements State.
func (l *Ledger) Take(now int64, p *Params, n, maxDelay int64) sluice.Decision {
	return l.State.Take(now, p, n, maxDelay)
}

// Settle implements State.
func (l *Ledger) Settle(now int64, p *Params, n int64) sluice.Decision {
	return l.State.Settle(now, p, n)
}

// Algorithm implements State.
func (l *Ledger) Algorithm() sluice.Algorithm { return l.State.Algorithm() }

// Expiry returns the instant (Unix ns) at which the last open reservation expires, 0 when
// there is none: a store keeps the key at least until then, whatever its state.
func (l *Ledger) Expiry() int64 {
	var last int64
	for i := range l.Open {
		last = max(last, l.Open[i].Expires)
	}
	return last
}

// errNotLedger is a store's bug: a budget step decided on a state that is not a Ledger.
var errNotLedger = errors.New("algorithm: a budget step needs the key's Ledger (WithLedger)")

// ReservationOpen is the error of a reserve whose id names a reservation already open.
var ReservationOpen error = &sluice.FieldError{Field: "id", Reason: "already names an open reservation", Err: sluice.ErrInvalidN}

// NoReservation is the error of an extension or commit of a reservation the key does not hold
// open: unknown, committed, cancelled or expired (sluice.ErrNoReservation). The Redis store
// answers it too. Neither error repeats the id, a value of the caller's request.
var NoReservation error = &sluice.FieldError{Field: "id", Reason: "not open (unknown, committed, cancelled or expired)", Err: sluice.ErrNoReservation}

// step decides a budget step (req.Kind().Budget()) at now: the reservations expired by now are
// dropped first, a free one giving back what the state still counts of it, in one refund; then
// the step.
//
// A reserve (of an id not open) or an extension (of an open one) is admitted by the step's mode
// (see admit); an admitted one holds its units for the reservation, whose TTL starts again
// from now. A key that holds sluice.MaxOpenReservations refuses a reserve, RetryAfter saying
// when the soonest expires. A commit of actual units ends the reservation: a settle of actual
// minus what it held, the excess charged even past the limit, what is over-held given back
// only while the state still counts it (at most Counted) — so a refund never frees units that
// already left the state with their window. Its Decision is the settle's. An extension or
// commit of a reservation not open is NoReservation and moves nothing; so is a reserve of an
// id already open (ReservationOpen).
func (l *Ledger) step(now int64, p *Params, req *sluice.Request) (sluice.Decision, error) {
	if p.maxDebt < p.capacity { // a budget step's debt bound (BudgetDebt)
		bp := *p
		bp.maxDebt = p.capacity
		p = &bp
	}
	l.expire(now, p)
	b := &req.Budget
	i := l.find(b.ID)
	switch b.Op {
	case sluice.BudgetReserve:
		if i >= 0 {
			return sluice.Decision{}, ReservationOpen
		}
		if len(l.Open) >= sluice.MaxOpenReservations {
			return l.full(now, p), nil
		}
		d := admit(l.State, now, p, req.N, b.Mode)
		if d.Allowed {
			l.Open = append(l.Open, Reservation{ID: b.ID, Free: b.FreeOnExpiry})
			l.Open[len(l.Open)-1].hold(now, p, req.N, b.TTLFor(p.Rule))
			l.soonest = min(l.soonest, l.Open[len(l.Open)-1].Expires)
		}
		return d, nil
	case sluice.BudgetExtend:
		if i < 0 {
			return sluice.Decision{}, NoReservation
		}
		var d sluice.Decision
		if req.N == 0 { // a renewal
			d = l.State.Take(now, p, 0, 0)
			d.Allowed = true
		} else {
			d = admit(l.State, now, p, req.N, b.Mode)
		}
		if d.Allowed {
			l.Open[i].hold(now, p, req.N, b.TTLFor(p.Rule))
			l.soonest = min(l.soonest, l.Open[i].Expires) // a shorter TTL may bring it closer
		}
		return d, nil
	}
	if i < 0 {
		return sluice.Decision{}, NoReservation
	}
	r := l.Open[i]
	l.remove(i)
	return l.State.Settle(now, p, r.settlement(now, req.N)), nil
}

// admit decides a reserve or an extension of n units: Strict takes them only if they fit (a
// take of n); Bounded takes them while the budget is not spent, that is when one unit fits (a
// take of one, whose RetryAfter a refusal keeps), and then charges the other n - 1 whatever
// the limit (a settle, into debt if need be), so the budget is overshot by at most the units of
// the one reservation that found it not yet spent. In either mode more units than the capacity
// are refused as a take refuses them (RetryAfter sluice.Never): so a key never holds more than
// twice its capacity, within the budget steps' debt bound (BudgetDebt: at least the
// capacity), and each reservation's Counted is what it charged. An admitted decision has RetryAfter 0.
//
// The decision's Remaining is what the budget had left when the step came, its own units not
// counted (a refusal takes none): the remaining a client is shown, which falls after each
// response by what the response cost, not by its estimate. It is exact in both modes, where
// what is left after a bounded reservation that overshoots (0) would not tell it.
func admit(s State, now int64, p *Params, n int64, mode sluice.BudgetMode) sluice.Decision {
	if mode == sluice.Strict || n > p.capacity {
		d := s.Take(now, p, n, 0)
		if d.Allowed {
			d.Remaining += n
		}
		return d
	}
	d := s.Take(now, p, 1, 0)
	if !d.Allowed {
		return d
	}
	left := d.Remaining + 1
	d = s.Settle(now, p, n-1)
	d.Remaining, d.RetryAfter = left, 0
	return d
}

// hold adds n units held at now to r, which then expires ttl after now (in whole ms): what it
// counted before is forgotten once its charges have left the state, and the charges now leave
// at ChargeLife(now).
func (r *Reservation) hold(now int64, p *Params, n int64, ttl time.Duration) {
	if now >= r.Until {
		r.Counted = 0
	}
	r.Held = min(r.Held+n, maxHeld)
	r.Counted = min(r.Counted+n, maxHeld)
	r.Until = ChargeLife(p, now)
	r.Expires = floorMs(now) + int64(ttl)
}

// settlement is the settle that commits r at actual units at now: the excess over Held
// charged, or the over-estimate given back up to what the state still counts of r.
func (r *Reservation) settlement(now, actual int64) int64 {
	switch delta := actual - r.Held; {
	case delta > 0:
		return min(delta, sluice.MaxLimit)
	case delta < 0 && now < r.Until:
		return -min(-delta, r.Counted, sluice.MaxLimit)
	}
	return 0
}

// expire drops the reservations expired at now (Expires <= now), giving back in one refund
// what the state still counts of the free ones.
func (l *Ledger) expire(now int64, p *Params) {
	if now < l.soonest {
		return // none has expired
	}
	l.soonest = math.MaxInt64
	var back int64
	for i := 0; i < len(l.Open); {
		r := &l.Open[i]
		if now < r.Expires {
			l.soonest = min(l.soonest, r.Expires)
			i++
			continue
		}
		if r.Free && now < r.Until {
			back = min(back+r.Counted, sluice.MaxLimit)
		}
		l.remove(i)
	}
	if back > 0 {
		l.State.Take(now, p, -back, 0)
	}
}

// full is the refusal of a reserve on a key holding MaxOpenReservations: the key's state as a
// peek reports it, refused, RetryAfter until the soonest reservation expires.
func (l *Ledger) full(now int64, p *Params) sluice.Decision {
	soonest := int64(math.MaxInt64)
	for i := range l.Open {
		soonest = min(soonest, l.Open[i].Expires)
	}
	d := l.State.Take(now, p, 0, 0)
	d.Allowed = false
	d.RetryAfter = dur(max(soonest-now, 1))
	return d
}

func (l *Ledger) find(id sluice.ReservationID) int {
	for i := range l.Open {
		if l.Open[i].ID == id {
			return i
		}
	}
	return -1
}

// remove drops reservation i, moving the last one into its place.
func (l *Ledger) remove(i int) {
	last := len(l.Open) - 1
	l.Open[i] = l.Open[last]
	l.Open = l.Open[:last]
}

// ChargeLife is the instant (Unix ns) at which units charged at now under p have left the
// state, so giving them back would free units the state no longer counts: the end of the
// fixed window; the end of the sliding window's last sub-window that still weighs the
// sub-window of now; now (in whole ms) plus the period for the sliding log; never
// (math.MaxInt64) for the token and leaky buckets and GCRA, which drain what they hold, so a
// refund at any later time leaves them as if the units had never been charged.
func ChargeLife(p *Params, now int64) int64 {
	length, count := ChargeWindows(p.Rule)
	if length == 0 {
		return math.MaxInt64
	}
	return (WindowIndex(now, length) + count) * length
}

// ChargeWindows returns how long units charged under a valid rule r stay in its state, as
// ChargeLife computes it: until the end of the count-th window of length (ns) from the one
// they were charged in; length 0 for the draining algorithms, whose charges never need
// bounding. The Redis scripts receive them (store/redis/lua/budget.lua).
func ChargeWindows(r sluice.Rule) (length, count int64) {
	ms := int64(time.Millisecond)
	switch r.Algorithm {
	case sluice.AlgorithmFixedWindow:
		return int64(r.Period), 1
	case sluice.AlgorithmSlidingWindow:
		return WindowShape(r).Length, r.Windows() + 1
	case sluice.AlgorithmSlidingLog:
		return ms, int64(r.Period) / ms
	}
	return 0, 0
}

// floorMs is t (Unix ns) rounded down to a whole millisecond.
func floorMs(t int64) int64 {
	ms := int64(time.Millisecond)
	return WindowIndex(t, ms) * ms
}
