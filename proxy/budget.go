package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/budget"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/gate"
)

// Budgets (the proxy sections' budgets, config.ProxyBudget): a request is estimated from its
// JSON body and its cost reserved on every budget that keys it, all or none (internal/gate's
// Budgets and Reserve), before its rate limits are decided; the response is metered as it
// flows (an event stream event by event, cut within one event when a budget is spent; a JSON
// body for the usage it reports) and committed at what it cost. A request its rate limits
// deny gives its reservations back.

// metered is one request's budgets: their reservations and the meter of its response.
type metered struct {
	rs      sluice.Reservations
	budgets []gate.Budget
	meter   *budget.Meter
	maxBody int
	started bool // the response's body is metered (the meter commits)
}

// reserveBudgets reserves the budgets of sc's request r; nil when none keys it. answered
// reports that r was answered here: a body too large or not a JSON request, a model without a
// price (400), a budget that refused (429, named), a store failure (503).
func (p *Proxy) reserveBudgets(w http.ResponseWriter, r *http.Request, sc *gate.Scratch) (m *metered, answered bool) {
	budgets := p.gate.Budgets(sc, "")
	if len(budgets) == 0 {
		return nil, false
	}
	maxBody := int64(0)
	for _, b := range budgets {
		maxBody = max(maxBody, orDefault(b.MaxBody, 1<<20))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	switch {
	case err != nil:
		httplimit.WriteProblem(w, r, &httplimit.ProblemDetails{Type: "about:blank", Title: "Bad Request", Status: http.StatusBadRequest,
			Detail: "The request body could not be read."})
		return nil, true
	case int64(len(body)) > maxBody:
		httplimit.WriteProblem(w, r, &httplimit.ProblemDetails{Type: "about:blank", Title: "Content Too Large", Status: http.StatusRequestEntityTooLarge,
			Detail: "The request body is larger than the proxy reads to estimate its cost."})
		return nil, true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	m = &metered{budgets: slices.Clone(budgets), maxBody: int(maxBody)}
	n := make([]int64, len(budgets))
	var est budget.Estimate
	for i, b := range budgets {
		if est, err = b.Estimator.Request(body); err == nil {
			if n[i], err = b.Charge()(est.Usage); err == nil && n[i] > sluice.MaxLimit {
				err = fmt.Errorf("an estimate of %d is more than the most a budget holds, %d", n[i], int64(sluice.MaxLimit))
			}
			if err == nil {
				continue
			}
		}
		p.metrics.invalid.Inc()
		httplimit.WriteProblem(w, r, &httplimit.ProblemDetails{Type: "about:blank", Title: "Bad Request", Status: http.StatusBadRequest,
			Detail: "The request's cost under budget " + b.Name + " cannot be estimated: " + err.Error()})
		return nil, true
	}
	rs, o := p.gate.Reserve(r.Context(), sc, budgets, n)
	if o != gate.Pass {
		p.metrics.count(o)
		p.gate.Write(r.Context(), w, sc, o, "")
		return nil, true
	}
	m.rs = rs
	m.meter = &budget.Meter{Reservations: &m.rs, Extractor: budgets[0].Extractor, Estimate: est.Usage}
	for _, b := range budgets {
		m.meter.Charges = append(m.meter.Charges, b.Charge())
	}
	return m, false
}

func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
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
