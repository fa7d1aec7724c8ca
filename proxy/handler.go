package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/gate"
)

// ServeHTTP decides the request against the rules (package internal/gate) and forwards it,
// or answers 429 (with the headers and problem body of package httplimit), 400 when a
// descriptor built from it is refused (a header value too long for a store key, a control
// character), or 503 when the store fails without a fallback. A request with budgets (the proxy
// sections' budgets) first has its estimate reserved, and its response metered (budget.go).
// ServeHTTP is safe for concurrent use.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.inflight.Add(1)
	defer p.inflight.Add(-1)
	start := time.Now()
	sc := gate.Get()
	defer sc.Release()
	sc.Request.Of(r)
	m, answered := p.reserveBudgets(w, r, sc)
	if answered {
		return
	}
	o := p.gate.Decide(r.Context(), sc, "")
	p.metrics.decision.Observe(time.Since(start).Seconds())
	if m != nil {
		sc.Results = gate.BudgetResults(sc.Results, m.budgets, &m.rs)
	}
	if o != gate.Pass {
		m.cancel(r.Context())
		p.metrics.count(o)
		p.gate.Write(r.Context(), w, sc, o, "")
		return
	}
	defer sc.Done() // the slots are held until the upstream's response body is done
	if m != nil {
		// the response is metered (meterResponse); a request the upstream does not answer
		// gives its reservations back
		defer m.cancel(r.Context())
		r = r.WithContext(context.WithValue(r.Context(), meteredKey{}, m))
	}
	p.gate.SetHeaders(w.Header(), sc)
	p.metrics.forwarded.Inc()
	p.forward(w, r)
}
