package pipeline

import (
	"context"
	"log/slog"

	"github.com/sluicehq/sluice"
)

// Charged reports whether the request's checks were charged by a limiter (not let through by
// the failure policy), so a cost reported after the handler can be settled on it.
func (q *Request) Charged() bool { return q.charged != nil && len(q.checks) > 0 }

// Settle settles a cost known after the handler: real units in all, against the estimate each
// check was charged, on every check whose limit does not count in units of its own (OwnCost),
// with the limiter that charged it (sluice.Limiter.Settle): a refund of an over-estimate, or an
// overage charged past the limit. ctx should outlive the client's request: the debt is owed
// all the same. A settle that fails is counted (SettleErrors) and logged as a store error.
func (q *Request) Settle(ctx context.Context, real int64) {
	p := q.p
	if q.charged == nil {
		return
	}
	for i := range q.checks {
		c := &q.checks[i]
		l := &p.limits[q.which[i]]
		if l.OwnCost {
			continue
		}
		delta := min(max(real-c.N, -sluice.MaxLimit), sluice.MaxLimit)
		if delta == 0 {
			continue
		}
		if _, err := q.charged.Settle(ctx, c.Key, c.Rule, delta); err != nil {
			if s := p.stats; s != nil {
				s.SettleErrors.Add(1)
			}
			p.warn(&p.storeLog, p.cfg.Name+": the store could not settle a request's cost; the estimate stands",
				slog.String("policy", l.Name), slog.Int64("delta", delta), slog.String("err", err.Error()))
		}
	}
	if s := p.stats; s != nil {
		s.Settled.Add(1)
	}
}
