package grpclimit

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
)

// Settle reports that serving the call of ctx cost cost more units, for its budgets
// (Limit.Budget): call it once with the total, or as the cost accrues (a stream); the reports
// add up, and once the handler returns the budgets' reservations are committed at their sum
// (at the estimate when nothing is reported). It returns false when the call has no budget
// reservation (no budget applies, the store failed), after the handler returned, or for a
// negative cost. Safe for concurrent use by the handler's goroutines.
func Settle(ctx context.Context, cost int64) bool {
	s, ok := ctx.Value(settleKey{}).(*settlement)
	if !ok || s.done.Load() || cost < 0 {
		return false
	}
	s.real.Add(cost)
	s.reported.Store(true)
	return true
}

type settleKey struct{}

// settlement is the context of a call with budget reservations: its parent, and the cost its
// handler reports.
type settlement struct {
	context.Context
	real     atomic.Int64
	reported atomic.Bool
	done     atomic.Bool
}

// Value implements context.Context.
func (s *settlement) Value(key any) any {
	if key == (settleKey{}) {
		return s
	}
	return s.Context.Value(key)
}

// settledStream is a server stream whose context carries the settlement.
type settledStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *settledStream) Context() context.Context { return s.ctx }

// commit commits the call's budget reservations at the cost its handler reported (nothing
// reported: call.end commits the estimate).
func (c *call) commit(s *settlement) {
	s.done.Store(true)
	if s.reported.Load() {
		c.q.Commit(context.WithoutCancel(s.Context), s.real.Load())
	}
}
