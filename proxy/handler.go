package proxy

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rls"
)

// ServeHTTP decides the request against the rules and forwards it, or answers 429 (with the
// headers and problem body of package httplimit), 400 when a descriptor built from it is
// refused (a header value too long for a store key, a control character), or 503 when the
// store fails without a fallback. ServeHTTP is safe for concurrent use.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.inflight.Add(1)
	defer p.inflight.Add(-1)
	start := time.Now()
	sc := getScratch()
	denied, err := p.decide(sc, r)
	p.metrics.decision.Observe(time.Since(start).Seconds())
	if err != nil {
		sc.release()
		p.refuse(w, r, err)
		return
	}
	httplimit.SetHeaders(w.Header(), p.cfg.HeaderStyle, sc.results)
	if denied {
		httplimit.WriteDenial(w, r, sc.results)
		sc.release()
		p.metrics.denied.Inc()
		return
	}
	sc.release()
	p.metrics.forwarded.Inc()
	p.forward(w, r)
}

// decide decides r in every domain that has a proxy section, collecting in sc.results the
// limits that applied (shadow-mode ones left out), and reports whether one denies it.
func (p *Proxy) decide(sc *scratch, r *http.Request) (bool, error) {
	denied := false
	for _, d := range p.currentPlan().domains {
		if !p.descriptors(sc, r, d) {
			continue
		}
		if err := p.eng.Decide(r.Context(), &sc.req, &sc.ans); err != nil {
			return false, err
		}
		for i := range sc.ans.Verdicts {
			v := &sc.ans.Verdicts[i]
			if !v.Limited || v.Limit == nil || v.Limit.ShadowMode { // nil: an override, never built here
				continue
			}
			sc.results = append(sc.results, httplimit.Result{Name: v.Limit.Name, Rule: v.Rule, Decision: v.Decision})
			denied = denied || v.Denied()
		}
		if denied { // later domains are not charged for a request that does not pass
			break
		}
	}
	return denied, nil
}

// refuse answers a request that could not be decided, with an RFC 9457 problem as the
// httplimit middleware does: 400 for a descriptor the rules refuse, else 503 of type
// temporary-reduced-capacity with Retry-After: 1 (the store failed without a fallback, or the
// request ended before its decision).
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if rls.KindOf(err) == rls.KindInvalid {
		p.metrics.invalid.Inc()
		msg := err.Error()
		p.invalidLog.Log(r.Context(), p.log, time.Now(), slog.LevelWarn, "request refused: a rate-limit descriptor built from it is invalid",
			slog.String("err", msg))
		httplimit.WriteProblem(w, r, &httplimit.Problem{Type: "about:blank", Title: "Bad Request",
			Status: http.StatusBadRequest, Detail: "A rate-limit descriptor built from the request is invalid: " + msg})
		return
	}
	p.metrics.unavailable.Inc() // the engine counted and logged a store error
	httplimit.WriteUnavailable(w, r, "The rate-limit store is unavailable.", nil)
}
