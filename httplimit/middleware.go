package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/internal/fastpath"
	"github.com/sluicehq/sluice/internal/inflight"
	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/internal/monotime"
)

// middleware is the configuration Options fill in and the handlers share.
type middleware struct {
	l        *sluice.Limiter
	limits   []Limit
	resolver *clientip.Resolver
	v6Bits   int
	mux      *http.ServeMux
	style    HeaderStyle
	cost     func(*http.Request) int64
	deny     func(http.ResponseWriter, *http.Request, []Result)
	failure  distributed.FailurePolicy
	fallback *sluice.Limiter
	leases   *sluice.Leases // the in-flight limits' slots (WithLeases)
	fbLeases *sluice.Leases // the in-flight slots under FailLocal, on fallback's store
	maxWait  time.Duration
	log      *slog.Logger
	stats    *Stats
	clock    sluice.Clock
	prefix   string
	settle   bool // WithSettle

	// keyPrefixes[i] is prefix + limits[i].Name + ":".
	keyPrefixes []string
	methods     [][]string
	routes      []map[string]bool
	// borrowKeys: the limiter's store copies the keys it keeps (the memory store), so keys
	// may point into the request's pooled buffer instead of being allocated.
	borrowKeys bool
	// policyHeaders caches the RateLimit-Policy value per set of applicable policies.
	policyHeaders atomic.Pointer[map[uint64][]string]
	policyMu      sync.Mutex

	storeLog, inputLog, routeLog logthrottle.Throttle
	// hot[i] is limits[i]'s hot-parameter sketch, or nil (hot.go).
	hot        []*hotkey.Param
	classState // criticality.go
}

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
// Each error names the field (*sluice.FieldError), all of them joined.
func New(l *sluice.Limiter, opts ...Option) (func(http.Handler) http.Handler, error) {
	m, err := build(l, opts)
	if err != nil {
		return nil, err
	}
	return m.wrap, nil
}

func build(l *sluice.Limiter, opts []Option) (*middleware, error) {
	m := &middleware{l: l, v6Bits: clientip.DefaultIPv6PrefixBits, clock: sluice.SystemClock{}, prefix: "http:",
		failure: distributed.FailOpen}
	for _, o := range opts {
		o.apply(m)
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	var errs []error
	if l == nil && len(m.limits) > 0 {
		errs = append(errs, &sluice.FieldError{Field: "limiter", Reason: "nil", Err: sluice.ErrNoStore})
		m.limits = nil
	}
	switch {
	case !m.failure.Valid():
		errs = append(errs, &sluice.FieldError{Field: "failure_policy", Reason: m.failure.String() + " is not a failure policy; failing open", Err: sluice.ErrInvalidRule})
		m.failure = distributed.FailOpen
	case m.failure == distributed.FailLocal && m.fallback == nil:
		errs = append(errs, &sluice.FieldError{Field: "fallback", Reason: "FailLocal without WithFallback; failing open", Err: sluice.ErrInvalidRule})
		m.failure = distributed.FailOpen
	}
	seen := map[string]bool{}
	valid := m.limits[:0:0]
	for i, p := range m.limits {
		if err := validateLimit(p, seen); err != nil {
			errs = append(errs, fmt.Errorf("httplimit: policies[%d]: %w", i, err))
			continue
		}
		seen[p.Name] = true
		valid = append(valid, p)
	}
	if len(valid) > 64 {
		errs = append(errs, &sluice.FieldError{Field: "policies", Reason: fmt.Sprintf("at most 64, got %d; the first 64 are enforced", len(valid)), Err: sluice.ErrInvalidRule})
		valid = valid[:64]
	}
	m.limits = valid
	if err := m.checkLeaser(); err != nil {
		errs = append(errs, err)
	}
	if err := m.buildHot(); err != nil {
		errs = append(errs, fmt.Errorf("httplimit: hot: %w", err))
		m.limits, m.hot = nil, nil
	}
	for _, p := range m.limits {
		m.keyPrefixes = append(m.keyPrefixes, m.prefix+p.Name+":")
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
	m.borrowKeys = copiesKeys(l) && (m.fallback == nil || copiesKeys(m.fallback))
	m.policyHeaders.Store(&map[uint64][]string{})
	return m, errors.Join(errs...)
}

// copiesKeys reports whether l decides in-process on the memory store, which copies the keys
// it keeps and holds none after a decision returns.
func copiesKeys(l *sluice.Limiter) bool {
	return l != nil && fastpath.IsLocal[sluice.Rule](l.Store())
}

// validateLimit checks one limit; seen holds the names of the valid limits before it.
func validateLimit(p Limit, seen map[string]bool) error {
	switch {
	case p.Shares != nil && p.Shares.Validate() != nil:
		return p.Shares.Validate()
	case p.Name == "":
		return &sluice.FieldError{Field: "name", Reason: "empty", Err: sluice.ErrInvalidRule}
	case len(p.Name) > 64:
		return &sluice.FieldError{Field: "name", Reason: fmt.Sprintf("%d bytes, more than 64", len(p.Name)), Err: sluice.ErrInvalidRule}
	case strings.ContainsFunc(p.Name, func(c rune) bool { return c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == ':' }):
		return &sluice.FieldError{Field: "name", Reason: fmt.Sprintf("%q has a character outside printable ASCII, or '\"', '\\' or ':'", p.Name), Err: sluice.ErrInvalidRule}
	case seen[p.Name]:
		return &sluice.FieldError{Field: "name", Reason: fmt.Sprintf("%q is used by another policy", p.Name), Err: sluice.ErrInvalidRule}
	}
	if err := validateInFlight(&p); err != nil {
		return fmt.Errorf("in_flight: %w", err)
	}
	if err := p.Rule.Validate(); err != nil && rated(&p) {
		return fmt.Errorf("rule: %w", err)
	}
	for _, k := range p.Key.parts {
		if k.kind == partHeader && k.header == "" {
			return &sluice.FieldError{Field: "key", Reason: "KeyHeader with an empty header name", Err: sluice.ErrInvalidRule}
		}
		if k.kind == partFunc && k.fn == nil {
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

// request is the per-request state, pooled: the key texts, the checks decided and their
// results. checks are exactly the charged checks of the request once it is allowed (their
// N and Decision), the state a post-response settlement works from.
type request struct {
	buf     []byte
	ends    []int // ends[i]: end of checks[i]'s key in buf
	checks  []sluice.Check
	results []Result
	which   []int // which[i]: the policy of checks[i]
	mask    uint64
	hot     hotkey.Batch     // the checks of hot keys (Limit.Hot), charged before the store decides
	claims  []inflight.Claim // the in-flight limits (Limit.InFlight), taken once the checks allow
}

var requestPool = sync.Pool{New: func() any {
	return &request{buf: make([]byte, 0, 256), ends: make([]int, 0, 4), checks: make([]sluice.Check, 0, 4),
		results: make([]Result, 0, 4), which: make([]int, 0, 4)}
}}

// ServeHTTP decides the request's limits and serves or denies it.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	q := requestPool.Get().(*request)
	defer q.release()
	m.collect(q, r)
	if len(q.checks) == 0 && len(q.claims) == 0 {
		h.next.ServeHTTP(w, r)
		return
	}
	charged := m.l // the limiter that charged the request, if it did
	d, err := sluice.Decision{Allowed: true}, error(nil)
	if len(q.checks) > 0 {
		d, err = q.hot.AllowAll(r.Context(), m.l, q.checks)
	}
	if err != nil {
		charged = nil
		if m.stats != nil {
			m.stats.StoreErrors.Add(1)
		}
		m.warn(&m.storeLog, "httplimit: the store could not decide; applying the failure policy",
			slog.String("failure", m.failure.String()), slog.Any("err", err))
		switch m.failure {
		case distributed.FailClosed:
			m.failClosed(w, r, q)
			return
		case distributed.FailLocal:
			d, err = q.hot.AllowAll(r.Context(), m.fallback, q.checks)
			charged = m.fallback
		}
		if err != nil || m.failure == distributed.FailOpen {
			if m.stats != nil {
				m.stats.FailedOpen.Add(1)
			}
			h.next.ServeHTTP(w, r)
			return
		}
	}
	allowed := d.Allowed
	if !allowed && m.maxWait > 0 {
		// Shaping: wait for the slot (WithWait, bounded by the request's context).
		if d, err := m.l.WaitAll(r.Context(), q.checks, m.maxWait); err == nil && d.Allowed {
			allowed = true
			if m.stats != nil {
				m.stats.Waited.Add(1)
			}
		}
	}
	m.fillResults(q)
	var now int64
	if m.style == HeadersBoth || m.style == HeadersX || m.style == HeadersOnDenial && !d.Allowed {
		now = m.unixNano()
	}
	setHeaders(w.Header(), m.style, q.results, m.policyHeader(q), now)
	if !allowed {
		if m.stats != nil {
			m.stats.Denied.Add(1)
		}
		if m.deny != nil {
			m.deny(w, r, q.results)
		} else {
			WriteDenial(w, r, q.results)
		}
		return
	}
	if len(q.claims) > 0 {
		if !h.acquire(w, r, q) {
			return
		}
		start := m.clock.Now()
		defer func() { inflight.Release(q.claims, m.clock.Now().Sub(start)) }()
	}
	if m.stats != nil {
		m.stats.Allowed.Add(1)
	}
	if m.settle {
		h.serveSettled(w, r, q, charged)
		return
	}
	h.next.ServeHTTP(w, r)
}

func (q *request) release() {
	clear(q.checks) // drop the key strings, which may point into buf
	clear(q.claims)
	q.buf, q.ends, q.checks, q.results, q.which, q.mask = q.buf[:0], q.ends[:0], q.checks[:0], q.results[:0], q.which[:0], 0
	q.claims = q.claims[:0]
	q.hot.Reset()
	if cap(q.buf) <= 64<<10 {
		requestPool.Put(q)
	}
}

// collect builds the checks of the limits that apply to r.
func (m *middleware) collect(q *request, r *http.Request) {
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
		if p.Cost != nil {
			n = m.costOf(p.Cost, p.Name, r)
		} else {
			if shared < 0 {
				shared = m.costOf(m.cost, p.Name, r)
			}
			n = shared
		}
		if n == 0 {
			continue
		}
		start := len(q.buf)
		q.buf = append(q.buf, m.keyPrefixes[i]...)
		var ok bool
		q.buf, ok = p.Key.appendKey(q.buf, r, m)
		if !ok || (m.hot[i] != nil && q.hot.Observe(m.hot[i], len(q.checks), string(q.buf[start:]), n).Cold) {
			q.buf = q.buf[:start]
			continue
		}
		if p.InFlight != nil {
			if p.Shares != nil && !classKnown {
				class, classKnown = m.class(r), true
			}
			q.claim(p, string(q.buf[start:]), class)
			if !rated(p) {
				q.buf = q.buf[:start]
				continue
			}
		}
		q.ends = append(q.ends, len(q.buf))
		q.checks = append(q.checks, sluice.Check{Rule: p.Rule, N: n})
		if p.Shares != nil {
			if !classKnown {
				class, classKnown = m.class(r), true
			}
			c := &q.checks[len(q.checks)-1]
			c.Criticality, c.Reserve = class, p.Shares.Reserve(class, p.Rule.Capacity())
		}
		q.which = append(q.which, i)
		q.mask |= 1 << i
	}
	// Keys are cut from buf only now that it no longer grows.
	start := 0
	for i, end := range q.ends {
		if m.borrowKeys {
			q.checks[i].Key = unsafe.String(&q.buf[start], end-start)
		} else {
			q.checks[i].Key = string(q.buf[start:end])
		}
		start = end
	}
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
	m.warn(&m.routeLog, "httplimit: no route pattern for the request (unknown route, or the middleware wraps a mux without WithServeMux); route policies count it under "+noRoute,
		slog.String("method", r.Method), slog.String("path", r.URL.Path))
	return noRoute
}

func (m *middleware) fillResults(q *request) {
	for i := range q.checks {
		p := &m.limits[q.which[i]]
		q.results = append(q.results, Result{Name: p.Name, Rule: p.Rule, Decision: q.checks[i].Decision})
	}
}

// failClosed answers 503 for a request the store could not decide.
func (m *middleware) failClosed(w http.ResponseWriter, r *http.Request, q *request) {
	if m.stats != nil {
		m.stats.FailedClosed.Add(1)
	}
	names := make([]string, len(q.which))
	for i, p := range q.which {
		names[i] = m.limits[p].Name
	}
	WriteUnavailable(w, r, "The rate limiter cannot decide right now.", names)
}

// WriteUnavailable answers 503 with Retry-After 1 and the draft's temporary-reduced-capacity
// problem: the request was not decided because the rate limiter's store is unavailable (fail
// closed). policies names the policies that could not be decided; detail says why.
func WriteUnavailable(w http.ResponseWriter, r *http.Request, detail string, policies []string) {
	w.Header()[headerRetryAfter] = []string{"1"}
	WriteProblem(w, r, &Problem{Type: ProblemTemporaryReducedCapacity,
		Title: "Request cannot be satisfied due to temporary server capacity constraints", Status: http.StatusServiceUnavailable,
		Detail: detail, ViolatedPolicies: policies})
}

// policyHeader returns the cached RateLimit-Policy value of q's policies.
func (m *middleware) policyHeader(q *request) []string {
	if m.style != HeadersBoth && m.style != HeadersIETF {
		return nil
	}
	if v, ok := (*m.policyHeaders.Load())[q.mask]; ok {
		return v
	}
	v := policyValue(q.results)
	m.policyMu.Lock()
	defer m.policyMu.Unlock()
	old := *m.policyHeaders.Load()
	if len(old) < 1024 { // bounded: at most 2^policies sets, in practice a handful
		next := make(map[uint64][]string, len(old)+1)
		for k, x := range old {
			next[k] = x
		}
		next[q.mask] = v
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
			m.badInput("httplimit: cost function panicked; charging 1", r, slog.String("policy", policy), slog.String("panic", fmt.Sprint(v)))
			n = 1
		}
	}()
	n = f(r)
	if n < 0 {
		m.badInput("httplimit: cost function returned a negative cost; charging 1", r, slog.String("policy", policy), slog.Int64("cost", n))
		return 1
	}
	return n
}

// callKeyFunc calls a KeyFunc, recovering a panic as a missing key.
func (m *middleware) callKeyFunc(f func(*http.Request) (string, bool), r *http.Request) (key string, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			m.badInput("httplimit: key function panicked; the policy does not count this request", r, slog.String("panic", fmt.Sprint(v)))
			key, ok = "", false
		}
	}()
	return f(r)
}

func (m *middleware) badInput(msg string, r *http.Request, attrs ...slog.Attr) {
	if m.stats != nil {
		m.stats.BadInput.Add(1)
	}
	m.warn(&m.inputLog, msg, append(attrs, slog.String("method", r.Method), slog.String("path", r.URL.Path))...)
}

// warn logs msg at level Warn through t: at most one line a second of each kind, with the
// number held back since the last in "suppressed".
func (m *middleware) warn(t *logthrottle.Throttle, msg string, attrs ...slog.Attr) {
	t.Log(context.Background(), m.log, m.clock.Now(), slog.LevelWarn, msg, attrs...)
}
