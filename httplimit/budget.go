package httplimit

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/budget"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// LLM says how the middleware's budgets (Limit.Budget) read an LLM API's requests and
// responses (WithLLM).
type LLM struct {
	// Estimator estimates a request's usage from its JSON body (its max_tokens and prompt).
	Estimator budget.Estimator
	// Extractor reads the usage the response reports; nil is budget.OpenAI.
	Extractor budget.Extractor
	// Charges price usage per policy name (budget.Tokens, a Prices' Cost); a budget policy
	// not listed counts tokens.
	Charges map[string]budget.Charge
	// MaxBody bounds the request body read for the estimate (0 means 1 MiB): a larger one is
	// answered 413.
	MaxBody int64
	// Step is budget.Meter's Step (0 means 1/4).
	Step float64
}

// WithLLM makes the budgets of an LLM API exact: a request's cost under each budget is its
// estimate (LLM.Estimator, read from the body, which the handler then reads as sent) priced
// by the budget's Charge; the response's usage is read as the handler writes it (LLM.Extractor)
// and committed; a streamed response (text/event-stream) is metered event by event, its
// reservation extended from the budget as it flows (budget.Meter), and cut within one event
// when the budget is spent: the provider's error event is written instead, and the handler's
// later writes fail with budget.ErrCut. A client that goes away is charged what the handler
// produced. A request whose body is not a JSON object, or names a model a price table does not
// list, is answered 400 and charged nothing.
func WithLLM(llm LLM) Option {
	return optionFunc(func(m *middleware) {
		if llm.Extractor == nil {
			llm.Extractor = budget.OpenAI
		}
		if llm.MaxBody <= 0 {
			llm.MaxBody = 1 << 20
		}
		m.llm = &llm
	})
}

// charge returns the Charge of the budget policy named name.
func (l *LLM) charge(name string) budget.Charge {
	if c, ok := l.Charges[name]; ok && c != nil {
		return c
	}
	return budget.Tokens
}

// estimate reads r's body for its estimate and puts it back for the handler; false when it
// answered r itself (a body too large or not a JSON request).
func (m *middleware) estimate(w http.ResponseWriter, r *http.Request) (*budget.Estimate, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, m.llm.MaxBody+1))
	if err == nil && int64(len(body)) > m.llm.MaxBody {
		WriteProblem(w, r, &ProblemDetails{Type: "about:blank", Title: "Content Too Large", Status: http.StatusRequestEntityTooLarge,
			Detail: "The request body is larger than the rate limiter reads to estimate its cost."})
		return nil, false
	}
	if err != nil {
		WriteProblem(w, r, &ProblemDetails{Type: "about:blank", Title: "Bad Request", Status: http.StatusBadRequest,
			Detail: "The request body could not be read."})
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	est, err := m.llm.Estimator.Request(body)
	if err != nil {
		WriteProblem(w, r, &ProblemDetails{Type: "about:blank", Title: "Bad Request", Status: http.StatusBadRequest,
			Detail: "The request's cost cannot be estimated: " + err.Error()})
		return nil, false
	}
	return &est, true
}

// serveMetered serves r to the handler through a writer that meters its response against the
// budgets' reservations rs and commits them (budget.Meter).
func (h *handler) serveMetered(w http.ResponseWriter, r *http.Request, q *pipeline.Request, rs *sluice.Reservations, est *budget.Estimate) {
	m := h.m
	meter := &budget.Meter{Reservations: rs, Extractor: m.llm.Extractor, Estimate: est.Usage, Step: m.llm.Step, Clock: m.clock}
	for _, i := range q.BudgetLimits() {
		meter.Charges = append(meter.Charges, m.llm.charge(m.limits[i].Name))
	}
	mw := &meteredWriter{ResponseWriter: w, meter: meter, ctx: r.Context()}
	defer mw.end()
	h.next.ServeHTTP(mw, r)
}

// meteredWriter is the ResponseWriter of a metered response: once the handler has written its
// header, an event stream goes through a budget.Writer, anything else through a copy of its
// first MaxBody bytes for its usage.
type meteredWriter struct {
	http.ResponseWriter
	meter   *budget.Meter
	ctx     context.Context
	started bool
	stream  *budget.Writer
	body    []byte
	over    bool
	status  int
}

func (mw *meteredWriter) WriteHeader(code int) {
	if !mw.started {
		mw.start(code)
	}
	mw.ResponseWriter.WriteHeader(code)
}

// start decides how the response is metered, from its status and Content-Type.
func (mw *meteredWriter) start(code int) {
	mw.started, mw.status = true, code
	if code < 300 && strings.HasPrefix(mw.Header().Get("Content-Type"), "text/event-stream") {
		mw.stream = mw.meter.Writer(mw.ctx, mw.ResponseWriter)
	}
}

func (mw *meteredWriter) Write(p []byte) (int, error) {
	if !mw.started {
		mw.start(http.StatusOK)
	}
	if mw.stream != nil {
		return mw.stream.Write(p)
	}
	if !mw.over {
		if len(mw.body)+len(p) > 1<<20 {
			mw.over, mw.body = true, nil
		} else {
			mw.body = append(mw.body, p...)
		}
	}
	return mw.ResponseWriter.Write(p)
}

// Flush flushes the underlying writer (an event stream flushes each event itself).
func (mw *meteredWriter) Flush() {
	if f, ok := mw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (mw *meteredWriter) Unwrap() http.ResponseWriter { return mw.ResponseWriter }

// end commits once the handler has returned: a stream at its end (or, when the client went
// away first, what was produced), a body at the usage it reports (or the estimate), an error
// response at nothing.
func (mw *meteredWriter) end() {
	ctx := context.WithoutCancel(mw.ctx)
	switch {
	case mw.stream != nil && mw.ctx.Err() != nil:
		mw.stream.Close()
	case mw.stream != nil:
		mw.stream.End()
	case mw.status >= 400:
		mw.meter.Cancel(ctx)
	case mw.over || !mw.started:
		mw.meter.Body(ctx, nil) // no usage read: the estimate stands
	default:
		mw.meter.Body(ctx, mw.body)
	}
}
