package server

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/gate"
	"github.com/sluicehq/sluice/rls"
)

// The forward-auth door: a gateway asks, before it serves a request, whether the rules
// admit it (NGINX auth_request, Caddy forward_auth, Traefik ForwardAuth), and Sluice
// decides the request the gateway describes exactly as sluice proxy would decide it
// (package internal/gate): 200 with the rate-limit headers, or 429 with Retry-After and a
// problem+json body (repeated in ProblemHeader), 400, 404, 503.
//
// The request is described by each gateway's own forwarded names, the sent request's own
// header carrying the rest (API keys, X-Forwarded-For):
//
//	method  X-Forwarded-Method (Caddy, Traefik), X-Original-Method (the NGINX snippet)
//	URI     X-Forwarded-Uri (Caddy, Traefik), X-Original-URI (NGINX's documented example)
//	host    X-Forwarded-Host (Caddy, Traefik; else the Host the gateway sent)
//	scheme  X-Forwarded-Proto ("https")
//	client  X-Forwarded-For, walked past the trusted proxies (Config.TrustedProxies) from the
//	        peer that asks: a gateway that is not trusted is itself the client. Every gateway
//	        writes X-Forwarded-For; a Forwarded header is the client's own, passed on by the
//	        gateway, and is not read (were it, a client could send one that disagrees and be
//	        counted as the gateway)
//
// Caddy v2.6.2 (modules/caddyhttp/reverseproxy/forwardauth/caddyfile.go) sets
// X-Forwarded-Method and X-Forwarded-Uri and its reverse proxy the X-Forwarded-For, -Proto
// and -Host; Traefik v3.7.13 (pkg/middlewares/auth/forward.go, writeHeader) sets
// X-Forwarded-For, -Method, -Proto, -Port, -Host and -Uri; NGINX 1.22's auth_request sends
// the original request's header to the location the snippet configures, which sets
// X-Original-URI ($request_uri), X-Original-Method ($request_method) and X-Forwarded-For
// ($proxy_add_x_forwarded_for).

// The forwarded names, first the one preferred.
var (
	methodNames = []string{"X-Forwarded-Method", "X-Original-Method"}
	uriNames    = []string{"X-Forwarded-Uri", "X-Original-Uri"}
)

// handleForwardAuth is /v1/forward-auth/{domain} (any method: NGINX's subrequest keeps the
// client's), and /v1/forward-auth for every domain with a proxy section, as sluice proxy.
func (s *Server) handleForwardAuth(w http.ResponseWriter, r *http.Request) {
	defer s.timeHTTP(time.Now())
	sc := gate.Get()
	defer sc.Release()
	if err := forwardedRequest(&sc.Request, r); err != nil {
		s.gatewayMetrics.count(doorForwardAuth, gate.Invalid)
		sc.Err = err
		s.doors.Write(r.Context(), w, sc, gate.Invalid, "")
		return
	}
	s.answerHTTP(w, r, doorForwardAuth, sc, r.PathValue("domain"), true)
}

// forwardedRequest sets req to the request the gateway describes in r. A missing or
// malformed URI or method is an invalid error naming the headers.
func forwardedRequest(req *gate.Request, r *http.Request) error {
	h := r.Header
	uri, uriName := first(h, uriNames)
	if uri == "" {
		return rls.Invalidf("forward-auth: no X-Forwarded-Uri (Caddy, Traefik) or X-Original-URI (NGINX): the gateway must send the request's URI")
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return rls.Invalidf("forward-auth: %s: not a request URI (%d bytes)", uriName, len(uri))
	}
	method, _ := first(h, methodNames)
	if method == "" {
		return rls.Invalidf("forward-auth: no X-Forwarded-Method (Caddy, Traefik) or X-Original-Method (NGINX): the gateway must send the request's method")
	}
	host := h.Get("X-Forwarded-Host")
	if host == "" {
		host = r.Host
	}
	*req = gate.Request{Method: method, URL: u, Host: host, TLS: strings.EqualFold(h.Get("X-Forwarded-Proto"), "https"),
		Header: h, RemoteAddr: r.RemoteAddr, XForwardedFor: h["X-Forwarded-For"]}
	return nil
}

// first returns the first value of the first of names that h has, and that name.
func first(h http.Header, names []string) (string, string) {
	for _, n := range names {
		if vs := h[n]; len(vs) > 0 {
			return vs[0], n
		}
	}
	return "", ""
}

// handleExtAuthzHTTP is the HTTP form of Envoy's ext_authz, /v1/ext-authz/{domain}/...:
// Envoy sends the request's method and its path after its path_prefix
// (http_service.path_prefix: /v1/ext-authz/DOMAIN), with the headers its allowed_headers
// let through (x-forwarded-for, x-forwarded-proto and the ones the actions read). 200 admits
// the request (allowed_client_headers_on_success copies the rate-limit headers to the
// client); any other status denies it, its headers and body passed to the client (a 5xx is
// Envoy's error: failure_mode_allow decides).
func (s *Server) handleExtAuthzHTTP(w http.ResponseWriter, r *http.Request) {
	defer s.timeHTTP(time.Now())
	domain, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), extAuthzPrefix), "/")
	sc := gate.Get()
	defer sc.Release()
	u := *r.URL
	u.Path, u.RawPath = "", ""
	p, err := url.PathUnescape("/" + rest)
	if err == nil {
		u.Path, u.RawPath = p, "/"+rest
	}
	domain, derr := url.PathUnescape(domain)
	if err != nil || derr != nil || domain == "" {
		s.gatewayMetrics.count(doorExtAuthzHTTP, gate.Invalid)
		sc.Err = rls.Invalidf("ext_authz: the path must be %s{domain}/{the request's path}", extAuthzPrefix)
		s.doors.Write(r.Context(), w, sc, gate.Invalid, "")
		return
	}
	sc.Request.Of(r)
	sc.Request.URL, sc.Request.Forwarded = &u, nil // Envoy writes X-Forwarded-For (forwardedRequest)
	sc.Request.TLS = strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	s.answerHTTP(w, r, doorExtAuthzHTTP, sc, domain, false)
}

// extAuthzPrefix is the path of the HTTP form of ext_authz, before its domain.
const extAuthzPrefix = "/v1/ext-authz/"
