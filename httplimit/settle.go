package httplimit

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/pipeline"
)

// WithSettle settles costs known only after the response (LLM tokens generated, bytes served,
// rows scanned): the middleware's cost (WithCost) is then an estimate, taken before the
// handler runs; the handler reports the real cost with Settle, and once it has returned the
// middleware settles the difference, real - estimate, on every policy the request was charged
// under with the middleware's cost (the policies without a Cost of their own; a policy that
// counts requests gives itself a Cost of 1 to stay out), with sluice.Limiter.Settle: an
// over-estimate is refunded, an overage is charged even past the limit, so the key goes into
// debt and its next requests are denied until it is paid. A client therefore cannot stay under
// its quota with cheap-looking requests. A handler that does not call Settle keeps the
// estimate. The rate-limit headers, sent before the handler, describe the estimate.
//
// It costs a request passed to the handler two allocations (its context and the request
// copy that carries it), and one more (the settle's context) when the handler reports a
// cost. A settle that fails is logged (as store errors are) and counted in
// Stats.SettleErrors; it never changes the response.
func WithSettle() Option { return optionFunc(func(m *middleware) { m.settle = true }) }

// Settle reports that serving r cost cost more units (see WithSettle, and Limit.Budget, whose
// reservations are committed at the cost reported): call it once with the total, or as the
// cost accrues (a streamed response); the reports add up. It returns whether the cost will be
// settled: false when r does not come from a middleware with WithSettle that charged it, or
// one with a budget that reserved it (the request was not limited, or passed because the
// store failed), when the handler has already returned, or for a negative cost (logged,
// ignored). Safe for concurrent use by the handler's goroutines.
func Settle(r *http.Request, cost int64) bool {
	s, ok := r.Context().Value(settleKey{}).(*settlement)
	if !ok || s.done.Load() {
		return false
	}
	if cost < 0 {
		s.m.pl.BadInput("httplimit: Settle with a negative cost; ignored", slog.Int64("cost", cost),
			slog.String("method", r.Method), slog.String("path", r.URL.Path))
		return false
	}
	s.real.Add(cost)
	s.reported.Store(true)
	return true
}

type settleKey struct{}

// settlement is the context a settled request's handler sees: its parent, plus the real cost
// the handler reports (one allocation for both).
type settlement struct {
	context.Context
	m        *middleware
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

// serveSettled serves r to the handler with a settlement and then settles the cost it
// reported on q's checks (pipeline.Request.Settle).
func (h *handler) serveSettled(w http.ResponseWriter, r *http.Request, q *pipeline.Request) {
	s := &settlement{Context: r.Context(), m: h.m}
	h.next.ServeHTTP(w, r.WithContext(s))
	s.done.Store(true)
	if !s.reported.Load() {
		return // the budgets' estimates stand (pipeline.Request.Finish commits them)
	}
	// The request's context may be over (the client left): the debt is owed all the same. The
	// store bounds the call by its own timeout (every Sluice store has one).
	ctx := context.WithoutCancel(r.Context())
	if h.m.settle {
		q.Settle(ctx, s.real.Load())
	}
	q.Commit(ctx, s.real.Load())
}
