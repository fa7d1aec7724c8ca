// Package gate is the one decision of an HTTP request under the rules' proxy sections, shared
// by every door that decides HTTP requests on the descriptor engine: sluice proxy (which then
// forwards the request), and sluice serve's forward-auth (NGINX auth_request, Caddy
// forward_auth, Traefik ForwardAuth) and Envoy ext_authz (gRPC and HTTP) doors (which answer
// the gateway that asked).
//
// A door describes the request it was asked about as a Request (method, URL, host, scheme,
// headers, the peer that sent it); Gate.Decide builds its descriptors with the rules' proxy
// actions (Envoy's rate-limit actions, client addresses behind trusted proxies by package
// clientip), decides them with rls.Engine.Decide in each domain that has a proxy section,
// and takes the slots of its in-flight limits; the Scratch then holds the outcome, which
// Gate.Write answers over HTTP as package httplimit does (rate-limit headers, 429 with
// Retry-After and problem+json, 400, 503). A door writes only what its protocol adds.
package gate

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/inflight"
	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/rls"
)

// Request is what the rules' actions read of the HTTP request being decided. A door fills it
// from the request it serves (the proxy: the request itself; forward-auth: the gateway's
// forwarded names) and may reuse it.
type Request struct {
	// Method is the request's method.
	Method string
	// URL gives the path (the path action, cleaned) and the path and query as sent
	// (":path"). Required.
	URL *url.URL
	// Host is the host the client asked for (":authority", "Host").
	Host string
	// TLS reports whether the client used https (":scheme").
	TLS bool
	// Header is the request's header: request_headers and header_value_match read it.
	Header http.Header
	// RemoteAddr is the address of the peer that sent the request ("host:port" or an IP):
	// the client, or a proxy whose forwarding headers are believed when it is trusted.
	RemoteAddr string
	// XForwardedFor and Forwarded are the forwarding headers' values the client address is
	// walked through from RemoteAddr past trusted proxies (clientip.Resolver.Resolve).
	XForwardedFor, Forwarded []string
}

// Of sets req to describe r itself, its client walked through both forwarding headers.
func (req *Request) Of(r *http.Request) {
	*req = Request{Method: r.Method, URL: r.URL, Host: r.Host, TLS: r.TLS != nil, Header: r.Header, RemoteAddr: r.RemoteAddr,
		XForwardedFor: r.Header["X-Forwarded-For"], Forwarded: r.Header["Forwarded"]}
}

// Outcome is the outcome of Gate.Decide.
type Outcome uint8

// The outcomes.
const (
	// Pass: every limit admits the request; its in-flight slots (Scratch.Claims) are held
	// until Scratch.Done.
	Pass Outcome = iota
	// Denied: a rate limit denies the request (429).
	Denied
	// Refused: an in-flight limit has no free slot (429, or 503 for an adaptive limit).
	Refused
	// Invalid: a descriptor built from the request is refused by the rules (400).
	Invalid
	// Unavailable: the store failed without a fallback, or the request ended first (503).
	Unavailable
	// UnknownDomain: the domain asked for has no proxy section in the rules (404).
	UnknownDomain
)

// Gate decides requests on an engine under the proxy sections of its rules. It is safe for
// concurrent use.
type Gate struct {
	eng      *rls.Engine
	leases   *sluice.Leases // the slots of max_in_flight, in the engine's store
	resolver *clientip.Resolver
	log      *slog.Logger
	style    httplimit.HeaderStyle
	plan     atomic.Pointer[plan]
	// invalidLog and releaseLog throttle the lines of requests refused as invalid and of
	// failed lease releases.
	invalidLog, releaseLog logthrottle.Throttle
	releaseFailures        func() // counts a failed release; may be nil
}

// New returns a Gate deciding on eng, believing the client addresses that resolver's trusted
// proxies forward, writing the rate-limit headers of style. It holds the slots of in-flight
// limits on the engine's store (a sluice.Leases, renewed until released; Close stops the
// renewals); releaseFailures, when not nil, counts each release the store could not take,
// which is also logged.
func New(eng *rls.Engine, resolver *clientip.Resolver, style httplimit.HeaderStyle, log *slog.Logger, releaseFailures func()) *Gate {
	g := &Gate{eng: eng, resolver: resolver, style: style, log: log, releaseFailures: releaseFailures}
	g.leases = sluice.NewLeases(eng.Limiter().Store(), sluice.OnReleaseError(g.releaseFailed))
	return g
}

// Close stops the renewal of the in-flight slots held; those not released expire within
// their lease. It does not close the engine. Close is idempotent.
func (g *Gate) Close() error { return g.leases.Close() }

// releaseFailed counts and logs (at most once a second) a release of an in-flight slot the
// store could not take, at a request's end or after an acquire that failed: the slot stays
// held until its lease expires. Neither the key nor the store's message is logged: a key may
// hold a client's secret.
func (g *Gate) releaseFailed(err error) {
	if g.releaseFailures != nil {
		g.releaseFailures()
	}
	cause := "unavailable"
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		cause = "timeout"
	case !sluice.IsUnavailable(err):
		cause = "other"
	}
	g.releaseLog.Log(context.Background(), g.log, time.Now(), slog.LevelWarn,
		"in-flight slot not released: the store could not take the release; the slot stays held until its lease expires",
		slog.String("cause", cause))
}

// Resolver returns the gate's trusted proxies.
func (g *Gate) Resolver() *clientip.Resolver { return g.resolver }

// Style returns the style of the rate-limit headers the gate writes.
func (g *Gate) Style() httplimit.HeaderStyle { return g.style }

// Decide decides sc.Request in every domain that has a proxy section, or in domain alone
// when it is not empty, and when the rate limits admit it takes the slots of its in-flight
// limits. sc.Results then holds the limits that applied (shadow-mode ones left out), and
// sc.Err the error of Invalid and Unavailable.
func (g *Gate) Decide(ctx context.Context, sc *Scratch, domain string) Outcome {
	denied, found, err := g.decide(ctx, sc, domain)
	switch {
	case err != nil:
		sc.Err = err
		if rls.KindOf(err) == rls.KindInvalid {
			return Invalid
		}
		return Unavailable // the engine counted and logged a store error
	case !found:
		return UnknownDomain
	case denied:
		return Denied
	case len(sc.Claims) == 0:
		return Pass
	}
	i, err := inflight.Acquire(ctx, g.leases, sc.Claims)
	switch {
	case err != nil:
		sc.Err = g.eng.StoreError(ctx, err)
		return Unavailable
	case i >= 0:
		sc.refused = &sc.Claims[i]
		return Refused
	}
	sc.start = time.Now()
	return Pass
}

// decide decides sc's request in the domains with a proxy section (or domain alone),
// collecting sc.Results and sc.Claims, and reports whether the rules deny it and whether
// domain has a proxy section.
func (g *Gate) decide(ctx context.Context, sc *Scratch, domain string) (denied, found bool, err error) {
	found = domain == "" // no proxy section at all: nothing is limited
	for _, d := range g.currentPlan().domains {
		if domain != "" && d.Name != domain {
			continue
		}
		found = true
		if !g.descriptors(sc, d) {
			continue
		}
		if err := g.eng.Decide(ctx, &sc.req, &sc.ans); err != nil {
			return false, true, err
		}
		denied := sc.ans.Code == rls.CodeOverLimit
		quotaDenies := denied && quotaDenied(sc.ans.Verdicts)
		for i := range sc.ans.Verdicts {
			v := &sc.ans.Verdicts[i]
			if !v.Limited || v.Limit == nil || v.Limit.ShadowMode { // nil: an override, never built here
				continue
			}
			violates := denied && v.Denied() && (!v.Quota || quotaDenies)
			sc.Results = appendResults(sc.Results, v, violates)
		}
		if denied { // later domains are not charged for a request that does not pass
			return true, true, nil
		}
		sc.Claims = appendClaims(sc.Claims, sc.ans.Verdicts)
	}
	return false, found, nil
}

// SetHeaders sets the rate-limit headers of sc's results on h.
func (g *Gate) SetHeaders(h http.Header, sc *Scratch) {
	httplimit.SetHeaders(h, g.style, sc.Results)
}

// Write answers a request that did not pass (o is not Pass) as the httplimit middleware
// does: the rate-limit headers, and 429 with Retry-After and an RFC 9457 problem (Denied,
// Refused: 503 for an adaptive limit), 400 (Invalid), 503 of type
// temporary-reduced-capacity with Retry-After: 1 (Unavailable), 404 naming domain
// (UnknownDomain).
func (g *Gate) Write(ctx context.Context, w http.ResponseWriter, sc *Scratch, o Outcome, domain string) {
	var r *http.Request // httplimit's writers read nothing of the request
	switch o {
	case Denied:
		g.SetHeaders(w.Header(), sc)
		httplimit.WriteDenial(w, r, sc.Results)
	case Refused:
		g.SetHeaders(w.Header(), sc)
		c := sc.refused
		httplimit.WriteRefused(w, r, sc.Results, httplimit.Result{Name: c.Name, Decision: c.Decision()}, c.Overload())
	case Invalid:
		msg := sc.Err.Error()
		g.invalidLog.Log(ctx, g.log, time.Now(), slog.LevelWarn, "request refused: a rate-limit descriptor built from it is invalid",
			slog.String("err", msg))
		httplimit.WriteProblem(w, r, &httplimit.ProblemDetails{Type: "about:blank", Title: "Bad Request",
			Status: http.StatusBadRequest, Detail: "A rate-limit descriptor built from the request is invalid: " + msg})
	case UnknownDomain:
		httplimit.WriteProblem(w, r, &httplimit.ProblemDetails{Type: "about:blank", Title: "Not Found", Status: http.StatusNotFound,
			Detail: "No document of the rules has domain " + rls.Quote(domain) + " with a proxy section."})
	default:
		httplimit.WriteUnavailable(w, r, "The rate-limit store is unavailable.", nil)
	}
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
