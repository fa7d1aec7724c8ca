package rpclimit

import (
	"context"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/pipeline"
)

// Budgets (pipeline.Limit.Budget) on a door: an admitted call's handler runs in a Settlement,
// through which it reports what the call cost (Settle); once it returns, the call's budget
// reservations are committed at the sum reported, or at the estimate when nothing was
// (pipeline.Request.Finish).

// Settlement is the context of a call admitted with budget reservations: its parent, and the
// cost its handler reports.
type Settlement struct {
	context.Context
	q        *pipeline.Request
	real     atomic.Int64
	reported atomic.Bool
	done     atomic.Bool
}

type settlementKey struct{}

// Value implements context.Context.
func (s *Settlement) Value(key any) any {
	if key == (settlementKey{}) {
		return s
	}
	return s.Context.Value(key)
}

// Settling returns the context in which the handler of a call admitted with q runs: a
// Settlement of ctx when q holds budget reservations (call End once the handler returned),
// else nil.
func Settling(ctx context.Context, q *pipeline.Request) *Settlement {
	if q.Reservations() == nil {
		return nil
	}
	return &Settlement{Context: ctx, q: q}
}

// End commits the call's budget reservations at the cost its handler reported; when it
// reported none, they are left to pipeline.Request.Finish, which commits the estimate. Later
// reports are refused.
func (s *Settlement) End() {
	s.done.Store(true)
	if s.reported.Load() {
		s.q.Commit(context.WithoutCancel(s.Context), s.real.Load())
	}
}

// Settle reports that serving the call of ctx cost cost more units, for its budgets: once with
// the total, or as the cost accrues (a stream); the reports add up. It returns false when the
// call has no budget reservation (no budget applies, the store failed), after the handler
// returned, or for a negative cost. Safe for concurrent use by the handler's goroutines.
func Settle(ctx context.Context, cost int64) bool {
	s, ok := ctx.Value(settlementKey{}).(*Settlement)
	if !ok || s.done.Load() || cost < 0 {
		return false
	}
	s.real.Add(cost)
	s.reported.Store(true)
	return true
}
