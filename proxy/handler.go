package proxy

import (
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/gate"
)

// ServeHTTP decides the request against the rules (package internal/gate) and forwards it,
// or answers 429 (with the headers and problem body of package httplimit), 400 when a
// descriptor built from it is refused (a header value too long for a store key, a control
// character), or 503 when the store fails without a fallback. ServeHTTP is safe for
// concurrent use.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.inflight.Add(1)
	defer p.inflight.Add(-1)
	start := time.Now()
	sc := gate.Get()
	defer sc.Release()
	sc.Request.Of(r)
	o := p.gate.Decide(r.Context(), sc, "")
	p.metrics.decision.Observe(time.Since(start).Seconds())
	if o != gate.Pass {
		p.metrics.count(o)
		p.gate.Write(r.Context(), w, sc, o, "")
		return
	}
	defer sc.Done() // the slots are held until the upstream's response body is done
	p.gate.SetHeaders(w.Header(), sc)
	p.metrics.forwarded.Inc()
	p.forward(w, r)
}
