package grpclimit

import (
	"context"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/rpclimit"
)

// Settle reports that serving the call of ctx cost cost more units, for its budgets
// (Limit.Budget): call it once with the total, or as the cost accrues (a stream); the reports
// add up, and once the handler returns the budgets' reservations are committed at their sum
// (at the estimate when nothing is reported). It returns false when the call has no budget
// reservation (no budget applies, the store failed), after the handler returned, or for a
// negative cost. Safe for concurrent use by the handler's goroutines.
func Settle(ctx context.Context, cost int64) bool { return rpclimit.Settle(ctx, cost) }

// settledStream is a server stream whose context is its call's Settlement.
type settledStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *settledStream) Context() context.Context { return s.ctx }
