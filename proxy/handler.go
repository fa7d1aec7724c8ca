package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/inflight"
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
	m, answered := p.reserveBudgets(w, r, sc, p.currentPlan())
	if answered {
		sc.release()
		return
	}
	denied, err := p.decide(sc, r)
	p.metrics.decision.Observe(time.Since(start).Seconds())
	if err != nil {
		m.cancel(r.Context())
		sc.release()
		p.refuse(w, r, err)
		return
	}
	if m != nil {
		sc.results = m.results(sc.results, false)
	}
	httplimit.SetHeaders(w.Header(), p.cfg.HeaderStyle, sc.results)
	if denied {
		m.cancel(r.Context())
		httplimit.WriteDenial(w, r, sc.results)
		sc.release()
		p.metrics.denied.Inc()
		return
	}
	if m != nil {
		// the response is metered (meterResponse); a request the upstream does not answer
		// gives its reservations back
		defer m.cancel(r.Context())
		r = r.WithContext(context.WithValue(r.Context(), meteredKey{}, m))
	}
	if len(sc.claims) > 0 {
		if !p.acquire(w, r, sc) {
			m.cancel(r.Context())
			sc.release()
			return
		}
		// the slots are held until the upstream's response body is done
		defer func(start time.Time) { inflight.Release(sc.claims, time.Since(start)); sc.release() }(time.Now())
	} else {
		sc.release()
	}
	p.metrics.forwarded.Inc()
	p.forward(w, r)
}

// decide decides r in every domain that has a proxy section, collecting in sc.results the
// limits that applied (shadow-mode ones left out), and reports whether the rules deny it.
func (p *Proxy) decide(sc *scratch, r *http.Request) (bool, error) {
	for _, d := range p.currentPlan().domains {
		if !p.descriptors(sc, r, d) {
			continue
		}
		if err := p.eng.Decide(r.Context(), &sc.req, &sc.ans); err != nil {
			return false, err
		}
		denied := sc.ans.Code == rls.CodeOverLimit
		quotaDenies := denied && quotaDenied(sc.ans.Verdicts)
		for i := range sc.ans.Verdicts {
			v := &sc.ans.Verdicts[i]
			if !v.Limited || v.Limit == nil || v.Limit.ShadowMode { // nil: an override, never built here
				continue
			}
			violates := denied && v.Denied() && (!v.Quota || quotaDenies)
			sc.results = appendResults(sc.results, v, violates)
		}
		if !denied {
			sc.claims = appendClaims(sc.claims, sc.ans.Verdicts)
		}
		if denied { // later domains are not charged for a request that does not pass
			return true, nil
		}
	}
	return false, nil
}

// quotaDenied reports whether the quota-mode verdicts deny the request: there are some, and
// every one is over its limit (a quota-mode limit over its limit alone does not deny).
func quotaDenied(vs []rls.Verdict) bool {
	quotas := 0
	for i := range vs {
		if v := &vs[i]; v.Limited && v.Quota && !v.Shadow {
			if !v.Denied() {
				return false
			}
			quotas++
		}
	}
	return quotas > 0
}

// appendResults appends one result per limit of v, each under its own name with its own
// numbers; the limits over it are denied when violates (the request is denied because of
// them), else shown as allowed with what remains. A block is one result of quota 0 that no
// wait admits.
func appendResults(results []httplimit.Result, v *rls.Verdict, violates bool) []httplimit.Result {
	l := v.Limit
	if v.Block {
		period := l.Unit.Duration() * time.Duration(max(l.UnitMultiplier, 1))
		d := sluice.Decision{Allowed: true, ResetAfter: v.Reset}
		if violates {
			d.Allowed, d.RetryAfter = false, sluice.Never
		}
		return append(results, httplimit.Result{Name: l.Name, Rule: sluice.Rule{Period: period}, Decision: d})
	}
	if len(v.Decisions) == 0 { // decided without asking each rule (a hot parameter's cold value)
		d := v.Decision
		d.Allowed = d.Allowed || !violates
		return append(results, httplimit.Result{Name: ruleName(l, v.Binding), Rule: v.Rule, Decision: d})
	}
	for j, d := range v.Decisions {
		d.Allowed = d.Allowed || !violates
		if d.Allowed {
			d.RetryAfter = 0
		}
		results = append(results, httplimit.Result{Name: ruleName(l, j), Rule: l.Rules[j], Decision: d})
	}
	return results
}

// ruleName is the name of rule j of l in the headers and the 429 body.
func ruleName(l *config.Limit, j int) string {
	if j < len(l.RuleNames) {
		return l.RuleNames[j]
	}
	return l.Name
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
