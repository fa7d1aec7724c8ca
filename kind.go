package sluice

// RequestKind is what a Request asks of a store, as Request.Kind derives it from the
// request's fields. Every store decides each kind the same way: the stores that run package
// algorithm's states call algorithm.Apply, which dispatches on the kind once; the Redis
// scripts mirror it (store/redis/lua), held to it by the conformance suite (store/storetest).
type RequestKind uint8

// The kinds of request. Each names the fields that select it; Request.Validate says which
// other fields it may carry.
const (
	// KindTake (N > 0) consumes N units if they fit now, and otherwise is denied and
	// consumes nothing.
	KindTake RequestKind = iota
	// KindPeek (N = 0) reports the key's state and consumes nothing. With MaxDelay, a leaky
	// bucket's peek also reports when a request would start (Decision.Delay).
	KindPeek
	// KindRefund (N < 0) gives back -N units, never beyond full capacity.
	KindRefund
	// KindWait (N > 0 and MaxDelay > 0) is a take that a bucket algorithm may admit up to
	// MaxDelay ahead (Decision.Delay, Limiter.WaitN); window algorithms decide it as a take.
	KindWait
	// KindTakeHoldback (N > 0 and Holdback > 0) is a take admitted only if Holdback units
	// remain after it (a criticality class's holdback, Limiter.AllowClass).
	KindTakeHoldback
	// KindSettle (Settle) applies N whatever the limit (Limiter.Settle): a charge, a refund,
	// or a report when N = 0.
	KindSettle
	// KindBudgetReserve (Budget.Op BudgetReserve) opens a reservation of N units.
	KindBudgetReserve
	// KindBudgetExtend (Budget.Op BudgetExtend) holds N more units for a reservation.
	KindBudgetExtend
	// KindBudgetCommit (Budget.Op BudgetCommit) ends a reservation at its real cost N.
	KindBudgetCommit
)

var kindNames = [...]string{
	KindTake:          "take",
	KindPeek:          "peek",
	KindRefund:        "refund",
	KindWait:          "wait",
	KindTakeHoldback:  "take_holdback",
	KindSettle:        "settle",
	KindBudgetReserve: "budget_reserve",
	KindBudgetExtend:  "budget_extend",
	KindBudgetCommit:  "budget_commit",
}

// String returns the kind's name: "take", "peek", "refund", "wait", "take_holdback",
// "settle", "budget_reserve", "budget_extend" or "budget_commit".
func (k RequestKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Takes reports whether k takes N > 0 units against the limit: a take, a wait or a take with
// a holdback. The other kinds are admitted whatever the key holds (a refund, a settle) or
// consume nothing (a peek), or are budget steps (Budget), which a store decides with the
// key's reservations.
func (k RequestKind) Takes() bool {
	return k == KindTake || k == KindWait || k == KindTakeHoldback
}

// Budget reports whether k is a step of a budget reservation: a reserve, an extension or a
// commit (Request.Budget).
func (k RequestKind) Budget() bool {
	return k >= KindBudgetReserve && k <= KindBudgetCommit
}

// Kind classifies the request: a budget step first (by its Op), a settle (whatever N), then by
// N (a refund, a peek), then a take by what it carries (a holdback, a MaxDelay). It is
// meaningful for a valid request (Validate), which rejects the combinations no kind allows.
func (req *Request) Kind() RequestKind {
	switch {
	case req.Budget.Op != BudgetNone:
		return KindBudgetReserve + RequestKind(req.Budget.Op-BudgetReserve)
	case req.Settle:
		return KindSettle
	case req.N < 0:
		return KindRefund
	case req.N == 0:
		return KindPeek
	case req.Holdback > 0:
		return KindTakeHoldback
	case req.MaxDelay > 0:
		return KindWait
	}
	return KindTake
}
