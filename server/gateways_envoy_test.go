package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicehq/sluice/internal/testenv"
)

// Envoy is not run for real: no registry this project may use has an envoy binary (Debian
// bookworm has none, nor npm, and Envoy is C++: the Go module proxy serves only its API,
// go-control-plane). envoyExtAuthz replays what Envoy's ext_authz HTTP filter sends and does
// with the answer, from go-control-plane's types (envoy/service/auth/v3, the filter's
// extensions/filters/http/ext_authz/v3) and Envoy's source
// (source/extensions/filters/common/ext_authz/check_request_utils.cc: the CheckRequest;
// ext_authz_http_impl.cc: the HTTP service's request and the answer it reads), its
// configuration read from the documentation's blocks.

// extAuthzFilter returns the ext_authz filter of the nth ```yaml block of file's section
// title (http_filters: [ext_authz]), its typed_config checked against the proto.
func extAuthzFilter(t *testing.T, file, title string, n int, pairs ...string) *extauthzv3.ExtAuthz {
	t.Helper()
	doc, err := yamlToJSON(testenv.Replace(t, testenv.Block(t, file, title, "yaml", n), pairs...))
	if err != nil {
		t.Fatal(err)
	}
	filters, _ := doc["http_filters"].([]any)
	if len(filters) != 1 {
		t.Fatalf("%s, %q: want one http_filter, got %v", file, title, doc)
	}
	var filter extauthzv3.ExtAuthz
	typedConfig(t, filters[0].(map[string]any)["typed_config"], &filter)
	// The documented timeouts (250 ms) are for production; a race-detector run on a loaded
	// 2-core machine may take longer, which Envoy would answer as an error.
	long := durationpb.New(30 * time.Second)
	if g := filter.GetGrpcService(); g != nil {
		g.Timeout = long
	}
	if u := filter.GetHttpService().GetServerUri(); u != nil {
		u.Timeout = long
	}
	return &filter
}

// typedConfig decodes the JSON of an Any ("@type" and its fields) into msg, strictly.
func typedConfig(t *testing.T, js any, msg proto.Message) {
	t.Helper()
	var a anypb.Any
	if _, err := checkEnvoy(js, &a); err != nil {
		t.Fatal(err)
	}
	if err := a.UnmarshalTo(msg); err != nil {
		t.Fatal(err)
	}
}

// envoyExtAuthz is Envoy's ext_authz HTTP filter in front of next, with the route's
// context extensions; gRPC calls go to authz, HTTP calls to httpBase (the HTTP service's
// server_uri).
type envoyExtAuthz struct {
	filter     *extauthzv3.ExtAuthz
	extensions map[string]string
	authz      authv3.AuthorizationClient
	httpBase   string
	next       http.Handler
}

// checkRequest is the CheckRequest Envoy builds for r (createHttpCheck): the downstream
// connection's peer as the source, the request's headers lower-cased with its pseudo-headers.
func (e *envoyExtAuthz) checkRequest(r *http.Request) *authv3.CheckRequest {
	headers := map[string]string{":authority": r.Host, ":method": r.Method, ":path": r.URL.RequestURI(), ":scheme": "http"}
	for k, vs := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:      &authv3.AttributeContext_Peer{Address: socketAddress(r.RemoteAddr)},
		Destination: &authv3.AttributeContext_Peer{Address: socketAddress(r.Context().Value(http.LocalAddrContextKey).(net.Addr).String())},
		Request: &authv3.AttributeContext_Request{Time: timestamppb.Now(), Http: &authv3.AttributeContext_HttpRequest{
			Id: "1", Method: r.Method, Headers: headers, Path: r.URL.RequestURI(), Host: r.Host, Scheme: "http", Protocol: "HTTP/1.1",
		}},
		ContextExtensions: e.extensions,
	}}
}

func socketAddress(hostPort string) *corev3.Address {
	host, port, _ := net.SplitHostPort(hostPort)
	p, _ := strconv.ParseUint(port, 10, 32)
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(p)}}}}
}

func (e *envoyExtAuthz) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e.filter.GetHttpService() != nil {
		e.serveHTTPService(w, r)
		return
	}
	timeout := e.filter.GetGrpcService().GetTimeout().AsDuration()
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	resp, err := e.authz.Check(ctx, e.checkRequest(r))
	if err != nil {
		e.onError(w, r)
		return
	}
	if codes.Code(resp.GetStatus().GetCode()) != codes.OK {
		d := resp.GetDeniedResponse()
		for _, h := range d.GetHeaders() {
			w.Header().Set(h.GetHeader().GetKey(), h.GetHeader().GetValue())
		}
		status := int(d.GetStatus().GetCode())
		if status == 0 {
			status = http.StatusForbidden
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, d.GetBody())
		return
	}
	ok := resp.GetOkResponse()
	for _, h := range ok.GetHeaders() {
		r.Header.Set(h.GetHeader().GetKey(), h.GetHeader().GetValue())
	}
	for _, h := range ok.GetResponseHeadersToAdd() {
		w.Header().Set(h.GetHeader().GetKey(), h.GetHeader().GetValue())
	}
	e.next.ServeHTTP(w, r)
}

// onError is the filter's answer when the check failed (no answer, or the HTTP service's
// 5xx): failure_mode_allow admits, else status_on_error (403 by default).
func (e *envoyExtAuthz) onError(w http.ResponseWriter, r *http.Request) {
	if e.filter.GetFailureModeAllow() {
		e.next.ServeHTTP(w, r)
		return
	}
	status := int(e.filter.GetStatusOnError().GetCode())
	if status == 0 {
		status = http.StatusForbidden
	}
	w.WriteHeader(status)
}

// serveHTTPService is the HTTP service's check (RawHttpClientImpl::check, toResponse):
// the original method, path_prefix and the path, Content-Length 0, the check request's
// headers that allowed_headers (with authorization, :method, :path, :authority) lets
// through; a 5xx is an error, a 200 admits (allowed_client_headers_on_success to the
// client, allowed_upstream_headers to the app), anything else denies with its status, body
// and headers (every one but Host when allowed_client_headers is empty).
func (e *envoyExtAuthz) serveHTTPService(w http.ResponseWriter, r *http.Request) {
	hs := e.filter.GetHttpService()
	ctx, cancel := context.WithTimeout(r.Context(), hs.GetServerUri().GetTimeout().AsDuration())
	defer cancel()
	check := e.checkRequest(r).GetAttributes().GetRequest().GetHttp()
	req, err := http.NewRequestWithContext(ctx, r.Method, e.httpBase+hs.GetPathPrefix()+check.GetPath(), nil)
	if err != nil {
		e.onError(w, r)
		return
	}
	allowed := e.filter.GetAllowedHeaders().GetPatterns()
	for k, v := range check.GetHeaders() {
		switch {
		case k == ":authority":
			req.Host = v
		case k[0] == ':' || k == "content-length":
		case k == "authorization" || matchAny(allowed, k):
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.onError(w, r)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode >= 500:
		e.onError(w, r)
	case resp.StatusCode == http.StatusOK:
		ar := hs.GetAuthorizationResponse()
		for k, vs := range resp.Header {
			lk := strings.ToLower(k)
			if matchAny(ar.GetAllowedUpstreamHeaders().GetPatterns(), lk) {
				r.Header[k] = vs
			}
			if matchAny(ar.GetAllowedClientHeadersOnSuccess().GetPatterns(), lk) {
				w.Header()[k] = vs
			}
		}
		e.next.ServeHTTP(w, r)
	default:
		for k, vs := range resp.Header {
			if k != "Host" {
				w.Header()[k] = vs
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}
}

// matchAny reports whether key matches one of Envoy's string matchers (the forms the
// documentation uses).
func matchAny(ms []*matcherv3.StringMatcher, key string) bool {
	for _, m := range ms {
		v := key
		if m.GetIgnoreCase() {
			v = strings.ToLower(v)
		}
		switch p := m.GetMatchPattern().(type) {
		case *matcherv3.StringMatcher_Exact:
			if v == p.Exact {
				return true
			}
		case *matcherv3.StringMatcher_Prefix:
			if strings.HasPrefix(v, p.Prefix) {
				return true
			}
		case *matcherv3.StringMatcher_Contains:
			if strings.Contains(v, p.Contains) {
				return true
			}
		}
	}
	return false
}

// startEnvoy serves e (inside wrap, when given) on 127.0.0.1 in front of the app and returns
// its base URL.
func startEnvoy(t *testing.T, e *envoyExtAuthz, a *app, sluiceGRPC string, wrap ...func(http.Handler) http.Handler) string {
	t.Helper()
	appURL, err := url.Parse(a.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	e.next = httputil.NewSingleHostReverseProxy(appURL)
	if sluiceGRPC != "" {
		conn, err := grpc.NewClient(sluiceGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		e.authz = authv3.NewAuthorizationClient(conn)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler = e
	for _, w := range wrap {
		handler = w(handler)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Close() })
	return "http://" + lis.Addr().String()
}

// Issue 35: the README's ext_authz filter, replayed as Envoy's ext_authz HTTP filter calls
// Sluice's gRPC Authorization/Check (see envoyExtAuthz): the limit exact under concurrency,
// the rate-limit headers added to admitted answers (response_headers_to_add), Sluice's 429
// with its headers and problem+json body as the DeniedHttpResponse, a spoofed
// X-Forwarded-For counted against its sender (the source address is believed from the
// trusted Envoy); then Sluice down: the filter's error, 403 with failure_mode_allow: false.
func TestEnvoyExtAuthzGRPC(t *testing.T) {
	h := startGatewaySluice(t)
	a := startApp(t)
	e := &envoyExtAuthz{filter: extAuthzFilter(t, readme, "Envoy and Istio: ext_authz", 0)}
	if e.filter.GetGrpcService().GetEnvoyGrpc().GetClusterName() != "sluice" || e.filter.GetFailureModeAllow() {
		t.Fatalf("the README's filter: %v; want the sluice cluster, failing closed", e.filter)
	}
	base := startEnvoy(t, e, a, h.srv.GRPCAddr())
	checkGateway(t, h, base, a, true)
	checkDown(t, h, base, a, http.StatusForbidden, "the filter's 403 (failure_mode_allow: false)")
}

// useRemoteAddress is the http_connection_manager's use_remote_address: true, which the
// HTTP form needs: Envoy appends the downstream peer to X-Forwarded-For before its filters.
func useRemoteAddress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		if prior := r.Header.Get("X-Forwarded-For"); prior != "" {
			host = prior + "," + host
		}
		r.Header.Set("X-Forwarded-For", host)
		next.ServeHTTP(w, r)
	})
}

// Issue 35: the HTTP form of ext_authz (docs/OPERATIONS.md), replayed as Envoy's HTTP
// service calls /v1/ext-authz/edge/...: the same checks as the gRPC form, then Sluice down:
// 403.
func TestEnvoyExtAuthzHTTP(t *testing.T) {
	h := startGatewaySluice(t)
	a := startApp(t)
	e := &envoyExtAuthz{filter: extAuthzFilter(t, operations, "Envoy: ext_authz over HTTP, and per-route context", 0), httpBase: h.base}
	if e.filter.GetHttpService().GetPathPrefix() != "/v1/ext-authz/edge" {
		t.Fatalf("the documented filter: %v", e.filter)
	}
	base := startEnvoy(t, e, a, "", useRemoteAddress)
	checkGateway(t, h, base, a, true)
	// An unclean path is decided as sent, not redirected by Sluice's mux.
	if r := getAs(t, client("127.0.0.5"), base+"/a//b/../c"); r.status != http.StatusOK {
		t.Errorf("an unclean path: %d %q, want the app's answer", r.status, r.body)
	}
	stopSluice(t, h)
	if r := getAs(t, client("127.0.0.4"), base+"/"); r.status != http.StatusForbidden {
		t.Errorf("Sluice down: %d %q, want the filter's 403", r.status, r.body)
	}
}

const extensionRules = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: route
    value: checkout
    rate_limit: {unit: minute, requests_per_unit: 2}
proxy:
  rate_limits:
    - actions: [{remote_address: {}}]
`

// Issue 35: a route's context extensions (the documented per-route block) pick the domain
// and add a descriptor: the route's limit applies on that route only, across clients; an
// unknown domain is denied 404; with failure_mode_allow, Sluice down admits.
func TestEnvoyExtAuthzContextExtensions(t *testing.T) {
	h := start(t, extensionRules, func(c *serverConfig) { c.TrustedProxies = []string{"127.0.0.1"} })
	a := startApp(t)
	var perRoute extauthzv3.ExtAuthzPerRoute
	doc, err := yamlToJSON(testenv.Block(t, operations, "Envoy: ext_authz over HTTP, and per-route context", "yaml", 1))
	if err != nil {
		t.Fatal(err)
	}
	typedConfig(t, doc["typed_per_filter_config"].(map[string]any)["envoy.filters.http.ext_authz"], &perRoute)
	filter := extAuthzFilter(t, readme, "Envoy and Istio: ext_authz", 0)
	checkout := startEnvoy(t, &envoyExtAuthz{filter: filter, extensions: perRoute.GetCheckSettings().GetContextExtensions()}, a, h.srv.GRPCAddr())
	other := startEnvoy(t, &envoyExtAuthz{filter: filter}, a, h.srv.GRPCAddr())
	for i, c := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		want := http.StatusOK
		if i == 2 {
			want = http.StatusTooManyRequests // the route's 2 a minute, whoever asks
		}
		if r := getAs(t, client(c), checkout+"/"); r.status != want {
			t.Errorf("checkout, client %s: %d %q, want %d", c, r.status, r.body, want)
		}
	}
	if r := getAs(t, client("127.0.0.4"), other+"/"); r.status != http.StatusOK {
		t.Errorf("another route: %d, want 200 (the route's limit is the checkout route's)", r.status)
	}
	unknown := startEnvoy(t, &envoyExtAuthz{filter: filter, extensions: map[string]string{"domain": "nosuch"}}, a, h.srv.GRPCAddr())
	if r := getAs(t, client("127.0.0.2"), unknown+"/"); r.status != http.StatusNotFound || !strings.Contains(r.body, "nosuch") {
		t.Errorf("an unknown domain: %d %q, want 404 naming it", r.status, r.body)
	}
	open := proto.Clone(filter).(*extauthzv3.ExtAuthz)
	open.FailureModeAllow = true
	failOpen := startEnvoy(t, &envoyExtAuthz{filter: open}, a, h.srv.GRPCAddr())
	stopSluice(t, h)
	if r := getAs(t, client("127.0.0.2"), failOpen+"/"); r.status != http.StatusOK {
		t.Errorf("Sluice down, failure_mode_allow: %d, want the app's answer", r.status)
	}
}
