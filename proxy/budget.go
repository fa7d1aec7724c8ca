package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/budget"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rls"
)

// Budgets (the proxy sections' budgets, config.ProxyBudget): a request is estimated from its
// JSON body, its cost reserved on every budget that keys it, all or none, before its rate
// limits are decided; the response is metered as it flows (an event stream event by event,
// cut within one event when a budget is spent; a JSON body for the usage it reports) and
// committed at what it cost. A request its rate limits deny gives its reservations back.

// metered is one request's budgets: their reservations and the meter of its response.
type metered struct {
	rs      sluice.Reservations
	budgets []*config.Budget
	meter   *budget.Meter
	maxBody int
	started bool // the response's body is metered (the meter commits)
}

// reserveBudgets reserves r's budgets in the domains of pl; nil when none keys r. answered
// reports that r was answered here: a body too large or not a JSON request, a model without a
// price (400), a store failure (503), a budget that refused (429, named).
func (p *Proxy) reserveBudgets(w http.ResponseWriter, r *http.Request, sc *scratch, pl *plan) (m *metered, answered bool) {
	var budgets []*config.Budget
	var keys []string
	maxBody := int64(0)
	for _, d := range pl.domains {
		for _, b := range d.Budgets {
			if sc.http.r != r {
				sc.http = httpRequest{r: r, resolver: p.resolver}
			}
			var desc rls.Descriptor
			if !appendEntries(&desc, &sc.http, b.Actions) {
				continue
			}
			var k strings.Builder
			k.WriteString("budget:" + d.Name + ":" + b.Name)
			for _, e := range desc.Entries {
				k.WriteString(":" + e.Key + "=" + e.Value)
			}
			budgets, keys = append(budgets, b), append(keys, k.String())
			maxBody = max(maxBody, orDefault(b.MaxBody, 1<<20))
		}
	}
	if len(budgets) == 0 {
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	switch {
	case err != nil:
		httplimit.WriteProblem(w, r, &httplimit.Problem{Type: "about:blank", Title: "Bad Request", Status: http.StatusBadRequest,
			Detail: "The request body could not be read."})
		return nil, true
	case int64(len(body)) > maxBody:
		httplimit.WriteProblem(w, r, &httplimit.Problem{Type: "about:blank", Title: "Content Too Large", Status: http.StatusRequestEntityTooLarge,
			Detail: "The request body is larger than the proxy reads to estimate its cost."})
		return nil, true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	m = &metered{budgets: budgets, maxBody: int(maxBody)}
	holds := make([]sluice.Hold, len(budgets))
	var est budget.Estimate
	for i, b := range budgets {
		if est, err = b.Estimator.Request(body); err == nil {
			var n int64
			if n, err = b.Charge()(est.Usage); err == nil && n > sluice.MaxLimit {
				err = fmt.Errorf("an estimate of %d is more than the most a budget holds, %d", n, int64(sluice.MaxLimit))
			}
			if err == nil {
				holds[i] = sluice.Hold{Key: keys[i], Budget: b.Budget, N: n}
				continue
			}
		}
		p.metrics.invalid.Inc()
		httplimit.WriteProblem(w, r, &httplimit.Problem{Type: "about:blank", Title: "Bad Request", Status: http.StatusBadRequest,
			Detail: "The request's cost under budget " + b.Name + " cannot be estimated: " + err.Error()})
		return nil, true
	}
	rs, err := p.eng.Limiter().ReserveAll(r.Context(), holds)
	if err != nil {
		p.refuse(w, r, p.eng.StoreError(r.Context(), err))
		return nil, true
	}
	m.rs = rs
	m.meter = &budget.Meter{Reservations: &m.rs, Extractor: budgets[0].Extractor, Estimate: est.Usage}
	for _, b := range budgets {
		m.meter.Charges = append(m.meter.Charges, b.Charge())
	}
	if !rs.Decision.Allowed {
		results := m.results(nil, true)
		httplimit.SetHeaders(w.Header(), p.cfg.HeaderStyle, results)
		httplimit.WriteDenial(w, r, results)
		p.metrics.denied.Inc()
		return nil, true
	}
	return m, false
}

func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// results appends a result per budget: its reservation's decision, whose Remaining is what
// the budget had left when the request came (sluice.Reservation), so that it falls after each
// response by what it cost; a refused one as denied.
func (m *metered) results(out []httplimit.Result, refused bool) []httplimit.Result {
	for i := range m.rs.Holds {
		r := &m.rs.Holds[i]
		d := r.Decision
		if !refused {
			d.Allowed = true
		}
		out = append(out, httplimit.Result{Name: m.budgets[i].Name, Rule: r.Budget.Rule, Decision: d})
	}
	return out
}

// cancel gives back the reservations of a request that is not forwarded, or whose upstream
// produced nothing.
func (m *metered) cancel(ctx context.Context) {
	if m != nil && !m.started {
		m.started = true
		_, _ = m.rs.Cancel(context.WithoutCancel(ctx))
	}
}

// meteredKey is the context key of a forwarded request's *metered.
type meteredKey struct{}

// meterResponse (part of ReverseProxy.ModifyResponse) meters the body of a response to a
// request with budgets: an event stream through the meter, anything else read through for
// its usage; an error status commits nothing.
func (p *Proxy) meterResponse(resp *http.Response) {
	m, _ := resp.Request.Context().Value(meteredKey{}).(*metered)
	if m == nil || m.started {
		return
	}
	ctx := resp.Request.Context()
	switch {
	case resp.StatusCode >= 400 || resp.StatusCode == http.StatusSwitchingProtocols:
		m.cancel(ctx)
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		m.started = true
		m.meter.Done = p.budgetDone
		resp.Body = m.meter.Stream(ctx, resp.Body)
	default:
		m.started = true
		m.meter.Done = p.budgetDone
		resp.Body = m.meter.JSON(ctx, resp.Body, resp.ContentLength, m.maxBody)
	}
}

// budgetDone counts and logs how a metered response ended: a stream cut for want of budget,
// a commit the store could not make.
func (p *Proxy) budgetDone(res budget.Result) {
	if res.Cut {
		p.metrics.budgetCut.Inc()
		p.budgetLog.Log(context.Background(), p.log, time.Now(), slog.LevelInfo, "a streamed response was cut: its budget is spent",
			slog.Int64("usage_tokens", res.Usage.Tokens()))
	}
	if res.Err != nil && !errors.Is(res.Err, sluice.ErrNoReservation) {
		p.budgetLog.Log(context.Background(), p.log, time.Now(), slog.LevelWarn, "the store could not commit a budget reservation; it costs what it held",
			slog.String("err", res.Err.Error()))
	}
}
