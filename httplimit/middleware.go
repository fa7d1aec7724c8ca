package httplimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/budget"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/internal/monotime"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// middleware is the configuration Options fill in and the handlers share: how requests are
// read and answered over HTTP. What is decided and how (keys, hot keys, in-flight slots, the
// failure policy, stats and logs) is the pipeline's.
type middleware struct {
	pl       *pipeline.Pipeline
	limits   []Limit // the valid ones: limits[i] is the pipeline's limit i
	resolver *clientip.Resolver
	v6Bits   int
	mux      *http.ServeMux
	style    HeaderStyle
	cost     func(*http.Request) int64
	deny     func(http.ResponseWriter, *http.Request, []Result)
	maxWait  time.Duration
	log      *slog.Logger
	clock    sluice.Clock
	prefix   string
	settle   bool              // WithSettle
	llm      *LLM              // WithLLM
	pc       pipeline.Config   // what Options set of the pipeline's configuration
	methods  [][]string        // methods[i]: limits[i].Methods
	routes   []map[string]bool // routes[i]: limits[i].Routes as a set, nil for any
	// policyHeaders caches the RateLimit-Policy value per set of applicable policies.
	policyHeaders atomic.Pointer[map[uint64][]string]
	policyMu      sync.Mutex

	routeLog   logthrottle.Throttle
	classState // criticality.go
}

// The kinds of the application's defects the middleware reports (pipeline.Defect).
const (
	defectCost = iota // a cost function that panicked or returned a negative cost
	defectKey         // a key function that panicked
	numDefects
)

// Middleware returns net/http middleware that rate-limits requests with l under the limits
// of opts (WithLimits). For each request it decides every limit whose routes and methods
// match (see Limit), sets the rate-limit headers (WithHeaderStyle) and calls the handler, or
// answers with the denial (WriteDenial unless WithDenial). When l is nil or there is no
// limit, it returns handlers unchanged.
//
// A configuration error (see New) is logged and the limits at fault are left out, so
// Middleware never panics; use New to fail on them instead. The middleware is safe for
// concurrent use. On the memory store an allowed request costs no allocation in Sluice's own
// code but the header values: two small ones (one string, one slice), none with HeadersNone.
func Middleware(l *sluice.Limiter, opts ...Option) func(http.Handler) http.Handler {
	m, err := build(l, opts)
	if err != nil {
		m.log.Error("httplimit: configuration error; the policies at fault are not enforced", "err", err)
	}
	return m.wrap
}

// New is Middleware that returns configuration errors instead of logging them: a limit
// without a name or with a duplicate, bad or overlong one, an invalid rule, or no limiter.
// Each error names the limit ("httplimit: policies[2] ("search").rule: ...") and wraps a
// *sluice.FieldError naming the field, all of them joined.
func New(l *sluice.Limiter, opts ...Option) (func(http.Handler) http.Handler, error) {
	m, err := build(l, opts)
	if err != nil {
		return nil, err
	}
	return m.wrap, nil
}

func build(l *sluice.Limiter, opts []Option) (*middleware, error) {
	m := &middleware{v6Bits: clientip.DefaultIPv6PrefixBits, clock: sluice.SystemClock{}, prefix: "http:",
		pc: pipeline.Config{Name: "httplimit", Limiter: l, Failure: distributed.FailOpen}}
	for _, o := range opts {
		o.apply(m)
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	m.pc.Log, m.pc.Clock, m.pc.KeyPrefix = m.log, m.clock, m.prefix
	var errs []error
	if len(m.limits) > 64 {
		errs = append(errs, &sluice.FieldError{Field: "policies", Reason: fmt.Sprintf("at most 64, got %d; the first 64 are enforced", len(m.limits)), Err: sluice.ErrInvalidRule})
		m.limits = m.limits[:64]
	}
	all := make([]int, 0, len(m.limits))
	var specs []pipeline.Limit
	var paths []string
	var declared []Limit
	for i, p := range m.limits {
		path := "policies[" + strconv.Itoa(i) + "]"
		if err := validateKey(p.Key); err != nil {
			errs = append(errs, &pipeline.LimitError{Path: path, Name: p.Name, Field: "key", Err: err})
			continue
		}
		all = append(all, len(specs))
		specs = append(specs, p.spec())
		paths = append(paths, path)
		declared = append(declared, p)
	}
	pl, err := pipeline.New(m.pc, specs, paths, [][]int{all}, numDefects)
	if err != nil {
		errs = append(errs, err)
	}
	m.pl, m.limits = pl, nil
	for _, k := range pl.Kept() {
		p := declared[k]
		m.limits = append(m.limits, p)
		m.methods = append(m.methods, p.Methods)
		var routes map[string]bool
		if len(p.Routes) > 0 {
			routes = map[string]bool{}
			for _, r := range p.Routes {
				routes[r] = true
			}
		}
		m.routes = append(m.routes, routes)
	}
	m.policyHeaders.Store(&map[uint64][]string{})
	if err := errors.Join(errs...); err != nil {
		return m, fmt.Errorf("httplimit: %w", err)
	}
	return m, nil
}

// spec returns what the pipeline decides of p.
func (p Limit) spec() pipeline.Limit {
	return pipeline.Limit{Name: p.Name, Rule: p.Rule, Shares: p.Shares, Hot: p.Hot, InFlight: p.InFlight,
		Adaptive: p.Adaptive, OwnCost: p.Cost != nil, Budget: p.Budget}
}

// validateKey checks a Key's parts.
func validateKey(k Key) error {
	for _, part := range k.parts {
		if part.kind == partHeader && part.header == "" {
			return &sluice.FieldError{Field: "key", Reason: "KeyHeader with an empty header name", Err: sluice.ErrInvalidRule}
		}
		if part.kind == partFunc && part.fn == nil {
			return &sluice.FieldError{Field: "key", Reason: "KeyFunc with a nil function", Err: sluice.ErrInvalidRule}
		}
	}
	return nil
}

func (m *middleware) wrap(next http.Handler) http.Handler {
	if len(m.limits) == 0 {
		return next
	}
	return &handler{m: m, next: next}
}

type handler struct {
	m    *middleware
	next http.Handler
}

// ServeHTTP decides the request's limits and serves or denies it.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	q := m.pl.Get()
	defer q.Done() // after the handler, even when it panics: the slots are given back
	var est *budget.Estimate
	if m.llm != nil {
		var ok bool
		if est, ok = m.estimate(w, r); !ok {
			return
		}
	}
	if !m.collect(w, r, q, est) {
		return
	}
	if q.Empty() {
		h.next.ServeHTTP(w, r)
		return
	}
	o := q.Decide(r.Context(), m.maxWait)
	if o.Answer != pipeline.Pass {
		m.refuse(w, r, q, &o)
		return
	}
	if o.Decided && m.style != HeadersNone && m.style != HeadersOnDenial {
		m.setHeaders(w, q, q.Results(), o.Decision)
	}
	rs := q.Reservations()
	if rs != nil && m.llm != nil {
		h.serveMetered(w, r, q, rs, est)
		return
	}
	if m.settle && q.Charged() || rs != nil {
		h.serveSettled(w, r, q)
		return
	}
	h.next.ServeHTTP(w, r)
}

// setHeaders sets the rate-limit headers of results, the results of q's checks, decided d.
func (m *middleware) setHeaders(w http.ResponseWriter, q *pipeline.Request, results []Result, d sluice.Decision) {
	var now int64
	if m.style == HeadersBoth || m.style == HeadersX || m.style == HeadersOnDenial && !d.Allowed {
		now = m.unixNano()
	}
	setHeaders(w.Header(), m.style, results, m.policyHeader(q, results), now)
}

// refuse answers a request its limits did not let through, in the pipeline's outcome o:
// the rate-limit headers when its rates were decided, then the denial (429), the in-flight
// refusal (429, or 503 for an adaptive limit), the store's unavailability under FailClosed
// (503), a key built from it that the store refused (400), or the end of its context (503).
func (m *middleware) refuse(w http.ResponseWriter, r *http.Request, q *pipeline.Request, o *pipeline.Outcome) {
	var results []Result
	if o.Decided {
		results = q.Results()
		if m.style != HeadersNone {
			m.setHeaders(w, q, results, o.Decision)
		}
	}
	switch o.Answer {
	case pipeline.Deny:
		if m.deny != nil {
			m.denyWith(w, r, results)
		} else {
			WriteDenial(w, r, results)
		}
	case pipeline.Refuse:
		c := q.Refused()
		refused := Result{Name: c.Name, Decision: c.Decision()}
		if m.deny != nil && !c.Overload() {
			m.denyWith(w, r, append(results, refused))
			return
		}
		WriteRefused(w, r, results, refused, c.Overload())
	case pipeline.Unavailable:
		WriteUnavailable(w, r, "The rate limiter cannot decide right now.", q.Unavailable())
	case pipeline.Invalid:
		WriteProblem(w, r, &ProblemDetails{Type: "about:blank", Title: "Bad Request", Status: http.StatusBadRequest,
			Detail: "A rate-limit key built from the request is invalid: " + o.Err.(*sluice.FieldError).Reason})
	case pipeline.Canceled:
		WriteUnavailable(w, r, "The request ended before the rate limiter decided.", nil)
	}
}

// resultsPool holds the Result slices WithDenial's function is given (it must not keep them).
var resultsPool = sync.Pool{New: func() any { r := make([]Result, 0, 4); return &r }}

// denyWith calls WithDenial's function with a pooled copy of results.
func (m *middleware) denyWith(w http.ResponseWriter, r *http.Request, results []Result) {
	rp := resultsPool.Get().(*[]Result)
	*rp = append((*rp)[:0], results...)
	m.deny(w, r, *rp)
	clear(*rp)
	resultsPool.Put(rp)
}

// collect reads, for each limit that applies to r (its routes and methods), its key and
// cost, and adds them to q: a budget's cost under WithLLM is est priced by its Charge. A
// request whose estimate cannot be priced (a model the price table does not list) is answered
// 400 here, and collect reports false.
func (m *middleware) collect(w http.ResponseWriter, r *http.Request, q *pipeline.Request, est *budget.Estimate) bool {
	pattern := ""
	patternKnown := false
	shared := int64(-1) // the middleware's cost of r (WithCost), computed once
	class, classKnown := sluice.Critical, false
	for i := range m.limits {
		p := &m.limits[i]
		if !matchMethod(m.methods[i], r.Method) {
			continue
		}
		if m.routes[i] != nil {
			if !patternKnown {
				pattern, patternKnown = m.pattern(r), true
			}
			if !m.routes[i][pattern] {
				continue
			}
		}
		var n int64
		switch {
		case p.Budget != nil && est != nil:
			c, err := m.llm.charge(p.Name)(est.Usage)
			if err == nil && c > sluice.MaxLimit {
				err = fmt.Errorf("an estimate of %d is more than the most a budget holds, %d", c, int64(sluice.MaxLimit))
			}
			if err != nil {
				WriteProblem(w, r, &ProblemDetails{Type: "about:blank", Title: "Bad Request", Status: http.StatusBadRequest,
					Detail: "The request's cost under policy " + p.Name + " cannot be estimated: " + err.Error()})
				return false
			}
			n = min(c, sluice.MaxLimit)
		case p.Cost != nil:
			n = m.costOf(p.Cost, p.Name, r)
		default:
			if shared < 0 {
				shared = m.costOf(m.cost, p.Name, r)
			}
			n = shared
		}
		if n == 0 {
			continue
		}
		buf, ok := p.Key.appendKey(q.Begin(i), r, m)
		if !ok {
			continue
		}
		if q.Classed(i) && !classKnown {
			class, classKnown = m.class(r), true
		}
		q.Add(i, buf, n, class)
	}
	return true
}

func matchMethod(methods []string, method string) bool {
	if len(methods) == 0 {
		return true
	}
	for _, m := range methods {
		if m == method {
			return true
		}
	}
	return false
}

// pattern returns r's route pattern: r.Pattern, or the pattern of WithServeMux, or noRoute.
func (m *middleware) pattern(r *http.Request) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	if m.mux != nil {
		if _, p := m.mux.Handler(r); p != "" {
			return p
		}
	}
	m.pl.Notice(&m.routeLog, "httplimit: no route pattern for the request (unknown route, or the middleware wraps a mux without WithServeMux); route policies count it under "+noRoute,
		slog.String("method", r.Method), slog.String("path", r.URL.Path))
	return noRoute
}

// WriteUnavailable answers 503 with Retry-After 1 and the draft's temporary-reduced-capacity
// problem: the request was not decided because the rate limiter's store is unavailable (fail
// closed). policies names the policies that could not be decided; detail says why.
func WriteUnavailable(w http.ResponseWriter, r *http.Request, detail string, policies []string) {
	w.Header()[headerRetryAfter] = []string{"1"}
	WriteProblem(w, r, &ProblemDetails{Type: ProblemTemporaryReducedCapacity,
		Title: "Request cannot be satisfied due to temporary server capacity constraints", Status: http.StatusServiceUnavailable,
		Detail: detail, ViolatedPolicies: policies})
}

// policyHeader returns the cached RateLimit-Policy value of q's policies.
func (m *middleware) policyHeader(q *pipeline.Request, results []Result) []string {
	if m.style != HeadersBoth && m.style != HeadersIETF {
		return nil
	}
	mask := q.Mask()
	if v, ok := (*m.policyHeaders.Load())[mask]; ok {
		return v
	}
	v := policyValue(results)
	m.policyMu.Lock()
	defer m.policyMu.Unlock()
	old := *m.policyHeaders.Load()
	if len(old) < 1024 { // bounded: at most 2^policies sets, in practice a handful
		next := make(map[uint64][]string, len(old)+1)
		for k, x := range old {
			next[k] = x
		}
		next[mask] = v
		m.policyHeaders.Store(&next)
	}
	return v
}

// unixNano reads the middleware's clock: on the system clock, the monotonic clock without
// building a time.Time (half the cost of time.Now).
func (m *middleware) unixNano() int64 {
	if _, ok := m.clock.(sluice.SystemClock); ok {
		return monotime.UnixNano()
	}
	return m.clock.Now().UnixNano()
}

// costOf returns the cost of r by f (1 when f is nil) for the policy named policy: never
// negative, 1 when f fails.
func (m *middleware) costOf(f func(*http.Request) int64, policy string, r *http.Request) (n int64) {
	if f == nil {
		return 1
	}
	defer func() {
		if v := recover(); v != nil {
			m.pl.Defect(defectCost, "httplimit: cost function panicked; charging 1", slog.String("policy", policy), slog.String("panic", fmt.Sprint(v)),
				slog.String("method", r.Method), slog.String("path", r.URL.Path))
			n = 1
		}
	}()
	n = f(r)
	if n < 0 {
		m.pl.Defect(defectCost, "httplimit: cost function returned a negative cost; charging 1", slog.String("policy", policy), slog.Int64("cost", n),
			slog.String("method", r.Method), slog.String("path", r.URL.Path))
		return 1
	}
	return n
}

// callKeyFunc calls a KeyFunc, recovering a panic as a missing key.
func (m *middleware) callKeyFunc(f func(*http.Request) (string, bool), r *http.Request) (key string, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			m.pl.Defect(defectKey, "httplimit: key function panicked; the policy does not count this request", slog.String("panic", fmt.Sprint(v)),
				slog.String("method", r.Method), slog.String("path", r.URL.Path))
			key, ok = "", false
		}
	}()
	return f(r)
}
