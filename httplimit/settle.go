package httplimit

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// WithSettle settles costs known only after the response (LLM tokens generated, bytes served,
// rows scanned): the middleware's cost (WithCost) is then an estimate, reserved before the
// handler runs; the handler reports the real cost with Settle, and once it has returned the
// middleware settles the difference, real - estimate, on every policy the request was charged
// under with the middleware's cost (the policies without a Cost of their own; a policy that
// counts requests gives itself a Cost of 1 to stay out), with sluice.Limiter.Settle: an
// over-estimate is refunded, an overage is charged even past the limit, so the key goes into
// debt and its next requests are denied until it is paid. A client therefore cannot stay under
// its quota with cheap-looking requests. A handler that does not call Settle keeps the
// estimate. The rate-limit headers, sent before the handler, describe the reservation.
//
// It costs a request passed to the handler two allocations (its context and the request
// copy that carries it), and one more (the settle's context) when the handler reports a
// cost. A settle that fails is logged (as store errors are) and counted in
// Stats.SettleErrors; it never changes the response.
func WithSettle() Option { return optionFunc(func(m *middleware) { m.settle = true }) }

// Settle reports that serving r cost cost more units (see WithSettle): call it once with the
// total, or as the cost accrues (a streamed response); the reports add up. It returns whether
// the cost will be settled: false when r does not come from a middleware with WithSettle that
// charged it (the request was not limited, or passed because the store failed), when the
// handler has already returned, or for a negative cost (logged, ignored). Safe for concurrent
// use by the handler's goroutines.
func Settle(r *http.Request, cost int64) bool {
	s, ok := r.Context().Value(settleKey{}).(*settlement)
	if !ok || s.done.Load() {
		return false
	}
	if cost < 0 {
		s.m.badInput("httplimit: Settle with a negative cost; ignored", r, slog.Int64("cost", cost))
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

// serveSettled serves r to the handler with a settlement and then settles q's checks charged
// with the middleware's cost on l, the limiter that charged them.
func (h *handler) serveSettled(w http.ResponseWriter, r *http.Request, q *request, l *sluice.Limiter) {
	m := h.m
	s := &settlement{Context: r.Context(), m: m}
	h.next.ServeHTTP(w, r.WithContext(s))
	s.done.Store(true)
	if !s.reported.Load() {
		return
	}
	real := s.real.Load()
	// The request's context may be over (the client left): the debt is owed all the same. The
	// store bounds the call by its own timeout (every Sluice store has one).
	ctx := context.WithoutCancel(r.Context())
	for i := range q.checks {
		c := &q.checks[i]
		if m.limits[q.which[i]].Cost != nil {
			continue // counted in units of its own
		}
		delta := min(max(real-c.N, -sluice.MaxLimit), sluice.MaxLimit)
		if delta == 0 {
			continue
		}
		if _, err := l.Settle(ctx, c.Key, c.Rule, delta); err != nil {
			if m.stats != nil {
				m.stats.SettleErrors.Add(1)
			}
			m.warn(&m.storeLog, "httplimit: the store could not settle a request's cost; the estimate stands",
				slog.String("policy", m.limits[q.which[i]].Name), slog.Int64("delta", delta), slog.Any("err", err))
		}
	}
	if m.stats != nil {
		m.stats.Settled.Add(1)
	}
}
