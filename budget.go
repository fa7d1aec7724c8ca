package sluice

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"time"
)

// A budget is a limit whose cost is known only after the work: LLM tokens, bytes served, money.
// A request reserves its estimate (or its stated maximum) before the work, in one atomic step
// against the budget's rule in the store, and commits the real cost after it, which gives back
// what was over-estimated or charges the excess; a reservation never committed expires after
// its TTL. See Limiter.Reserve, Reservation, and Request.Budget for the store's side.

// Limits of budget reservations.
const (
	// MaxOpenReservations is the most reservations one key holds open at once: a reservation
	// or an extension past it is refused until one ends (commit, cancel, expiry).
	MaxOpenReservations = 10_000
	// MinReservationTTL is the shortest TTL of a reservation; the longest is its rule's
	// period. TTLs are counted in whole milliseconds (rounded down).
	MinReservationTTL = time.Millisecond
)

// ReservationID names one reservation of a budget: 128 random bits (NewReservationID), so a
// commit can only ever touch the reservation it names.
type ReservationID [16]byte

// NewReservationID returns a random id (from the runtime's random source, seeded by the
// operating system): two processes never pick the same one in practice.
func NewReservationID() ReservationID {
	var id ReservationID
	binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	if id == (ReservationID{}) {
		id[0] = 1 // the zero id names no reservation
	}
	return id
}

// String returns the id in hexadecimal, 32 characters.
func (id ReservationID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero id, which names no reservation.
func (id ReservationID) IsZero() bool { return id == ReservationID{} }

// ParseReservationID parses the 32 hexadecimal characters String writes. The error is a
// *FieldError naming "id".
func ParseReservationID(s string) (ReservationID, error) {
	var id ReservationID
	if len(s) != 2*len(id) {
		return id, fieldError(ErrInvalidN, "id", "want %d hexadecimal characters, got %d characters", 2*len(id), len(s))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return ReservationID{}, fieldError(ErrInvalidN, "id", "not hexadecimal")
	}
	if id.IsZero() {
		return id, fieldError(ErrInvalidN, "id", "the zero id names no reservation")
	}
	return id, nil
}

// BudgetMode is how a reservation is admitted against what its budget has left.
type BudgetMode uint8

const (
	// Bounded admits a reservation while the budget is not spent (at least one unit left)
	// and holds its units even past the limit: the budget is overshot by at most one
	// request's held units at any concurrency, since every reservation after it sees the
	// budget spent. Fewer requests are refused that would have fitted.
	Bounded BudgetMode = iota
	// Strict admits a reservation only when all its units fit: the budget is never exceeded
	// by what is held, but a request whose stated maximum does not fit is refused even when
	// its real cost would have.
	Strict
)

// String returns "bounded" or "strict".
func (m BudgetMode) String() string {
	switch m {
	case Bounded:
		return "bounded"
	case Strict:
		return "strict"
	}
	return "budget_mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseBudgetMode returns the mode named "bounded" or "strict" ("" is Bounded). The error is
// a *FieldError naming "mode".
func ParseBudgetMode(s string) (BudgetMode, error) {
	switch s {
	case "", "bounded":
		return Bounded, nil
	case "strict":
		return Strict, nil
	}
	return 0, fieldError(ErrInvalidRule, "mode", "unknown %q (want bounded or strict)", s)
}

// BudgetOp is one step of a reservation's life in a store (Request.Budget).
type BudgetOp uint8

const (
	// BudgetNone: the request is not a budget step.
	BudgetNone BudgetOp = iota
	// BudgetReserve opens reservation ID holding N units (0 to MaxLimit), admitted by Mode.
	// Its Decision's Remaining is what the budget had left when it came (its N not counted;
	// an extension's likewise).
	BudgetReserve
	// BudgetExtend holds N more units (0 to MaxLimit) for the open reservation ID, admitted
	// by Mode as a reservation of N would be, and renews its TTL from now; N = 0 only renews.
	BudgetExtend
	// BudgetCommit ends reservation ID at its real cost N (0 to MaxLimit; 0 cancels):
	// what it held beyond N is given back while the state still counts it, and what N exceeds
	// it by is charged even past the limit (a debt, as Settle).
	BudgetCommit
)

// BudgetStep is what a Request carries to be one step of a budget reservation (see the
// BudgetOp constants); its zero value makes the request an ordinary one.
type BudgetStep struct {
	// Op is the step; BudgetNone for an ordinary request.
	Op BudgetOp
	// ID names the reservation: a fresh one to reserve (NewReservationID), the reservation's
	// own to extend or commit. Never zero.
	ID ReservationID
	// TTL is how long a reservation lives from its reserve or last extension: 0 means the
	// rule's period; otherwise MinReservationTTL to the rule's period, in whole ms.
	TTL time.Duration
	// Mode admits a reserve or an extension (Bounded or Strict).
	Mode BudgetMode
	// FreeOnExpiry, on a reserve, makes a reservation that expires uncommitted cost nothing:
	// what it held is given back (at the key's next budget step, while the state still counts
	// it). By default it costs what it held, which is safe against a caller that crashes or
	// never commits on purpose.
	FreeOnExpiry bool
}

// TTLFor returns the reservation's TTL under rule r: TTL, or r.Period when TTL is 0, in
// whole milliseconds.
func (b BudgetStep) TTLFor(r Rule) time.Duration {
	ttl := b.TTL
	if ttl == 0 {
		ttl = r.Period
	}
	return ttl.Truncate(time.Millisecond)
}

// validateBudget checks a budget step: a reserve or extension holds 0 to MaxLimit units for
// TTL (0, or MinReservationTTL to the rule's period) in a known mode; a commit's real cost is 0
// to MaxLimit; none carries a settle, a criticality holdback or a MaxDelay; the id is not zero.
func (req *Request) validateBudget() error {
	b := &req.Budget
	field := "estimate"
	if b.Op == BudgetCommit {
		field = "actual"
	}
	switch {
	case b.Op > BudgetCommit:
		return fieldError(ErrInvalidN, "op", "unknown budget step %d", b.Op)
	case req.Settle || req.Holdback != 0 || req.MaxDelay != 0:
		return fieldError(ErrInvalidN, "op", "a budget step is no settle, has no criticality holdback and no max_delay")
	case b.ID.IsZero():
		return fieldError(ErrInvalidN, "id", "the zero id names no reservation")
	case req.N < 0 || req.N > MaxLimit:
		return fieldError(ErrInvalidN, field, "must be between 0 and %d, got %d", int64(MaxLimit), req.N)
	case b.Op == BudgetCommit:
		return nil
	case b.Mode > Strict:
		return fieldError(ErrInvalidN, "mode", "unknown budget mode %d", b.Mode)
	case b.TTL != 0 && (b.TTL < MinReservationTTL || b.TTL > req.Rule.Period):
		return fieldError(ErrInvalidN, "ttl", "must be between %v and the rule's period %v (0 for the period), got %v", MinReservationTTL, req.Rule.Period, b.TTL)
	}
	return nil
}
