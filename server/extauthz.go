package server

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/gate"
	"github.com/sluicehq/sluice/rls"
)

// The ext_authz door over gRPC: Envoy's envoy.service.auth.v3.Authorization/Check, on the
// gRPC port. The CheckRequest's HTTP request (method, path, host, scheme, headers) is
// decided as sluice proxy decides a request (package internal/gate): an OK answer carries the
// rate-limit headers for the client (response_headers_to_add), a denied one the 429 (or 400,
// 404) with its headers and problem+json body; a store that fails without a fallback is the
// gRPC error UNAVAILABLE, so that Envoy applies failure_mode_allow.
//
// The client address is the CheckRequest's source address (the sender of the request's last
// hop, as Envoy saw it) when the gRPC peer asking is a trusted proxy (Config.TrustedProxies),
// with the request's X-Forwarded-For walked past trusted hops; otherwise it is the gRPC peer.
//
// Per-route context (the filter's per-route check_settings.context_extensions):
//
//	domain  the rules' domain to decide in (default: every domain with a proxy section)
//	others  each other extension is an entry (key, value) of one more descriptor, entries
//	        in key order, decided with those of the proxy actions
type authzService struct {
	authv3.UnimplementedAuthorizationServer
	s *Server
}

// ContextDomain is the context extension naming the domain of an ext_authz check.
const ContextDomain = "domain"

// Check implements envoy.service.auth.v3.Authorization.
func (a authzService) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	s := a.s
	attrs := req.GetAttributes()
	hr := attrs.GetRequest().GetHttp()
	sc := gate.Get()
	defer sc.Release()
	if err := checkRequest(&sc.Request, hr, a.remote(ctx, attrs)); err != nil {
		s.gatewayMetrics.count(doorExtAuthzGRPC, gate.Invalid)
		sc.Err = err
		return a.denied(ctx, sc, gate.Invalid, ""), nil
	}
	ext := attrs.GetContextExtensions()
	domain := ext[ContextDomain]
	sc.Extra = appendExtensions(sc.Extra, ext)
	o, lease := s.decideGateway(ctx, doorExtAuthzGRPC, sc, domain)
	switch o {
	case gate.Pass:
		h := make(http.Header, 4)
		s.doors.SetHeaders(h, sc)
		ok := &authv3.OkHttpResponse{ResponseHeadersToAdd: headerOptions(h, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)}
		if lease != "" { // to the upstream, which may release it (POST /v1/leases/release)
			ok.Headers = headerOptions(http.Header{LeaseHeader: {lease}}, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD)
		}
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok}}, nil
	case gate.Unavailable:
		if rls.KindOf(sc.Err) == rls.KindCanceled {
			return nil, status.Error(codes.Canceled, sc.Err.Error())
		}
		return nil, status.Error(codes.Unavailable, "sluice: the rate-limit store is unavailable")
	}
	return a.denied(ctx, sc, o, domain), nil
}

// denied is the CheckResponse denying a request: the gate's HTTP answer (status, headers,
// problem+json body) as Envoy's DeniedHttpResponse.
func (a authzService) denied(ctx context.Context, sc *gate.Scratch, o gate.Outcome, domain string) *authv3.CheckResponse {
	var ans gate.Answer
	a.s.doors.Write(ctx, &ans, sc, o, domain)
	code := codes.ResourceExhausted
	switch o {
	case gate.Invalid:
		code = codes.InvalidArgument
	case gate.UnknownDomain:
		code = codes.NotFound
	}
	return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(ans.Status)},
			Headers: headerOptions(ans.Head, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
			Body:    string(ans.Body),
		}}}
}

// remote is the address of the last hop's sender: the CheckRequest's source when the gRPC
// peer is a trusted proxy, else the gRPC peer.
func (a authzService) remote(ctx context.Context, attrs *authv3.AttributeContext) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	addr, err := netip.ParseAddrPort(p.Addr.String())
	if err != nil || !a.s.doors.Resolver().Trusted(addr.Addr().Unmap()) {
		return p.Addr.String()
	}
	if sa := attrs.GetSource().GetAddress().GetSocketAddress(); sa != nil && sa.GetAddress() != "" {
		return net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
	}
	return p.Addr.String()
}

// checkRequest sets req to the HTTP request of a CheckRequest, read from remote; a missing or
// malformed path is an invalid error naming the field.
func checkRequest(req *gate.Request, hr *authv3.AttributeContext_HttpRequest, remote string) error {
	u, err := url.ParseRequestURI(hr.GetPath())
	if err != nil {
		return rls.Invalidf("ext_authz: attributes.request.http.path: not a request target (%d bytes)", len(hr.GetPath()))
	}
	h := make(http.Header, len(hr.GetHeaders()))
	for k, v := range hr.GetHeaders() {
		if k != "" && k[0] != ':' { // pseudo-headers are the fields read below
			h[textproto.CanonicalMIMEHeaderKey(k)] = []string{v}
		}
	}
	*req = gate.Request{Method: hr.GetMethod(), URL: u, Host: hr.GetHost(), TLS: hr.GetScheme() == "https", Header: h, RemoteAddr: remote,
		XForwardedFor: h["X-Forwarded-For"]} // Envoy writes X-Forwarded-For (forwardedRequest)
	return nil
}

// appendExtensions appends the context extensions other than ContextDomain as entries, in
// key order.
func appendExtensions(entries []rls.Entry, ext map[string]string) []rls.Entry {
	first := len(entries)
	for k, v := range ext {
		if k != ContextDomain {
			entries = append(entries, rls.Entry{Key: k, Value: v})
		}
	}
	slices.SortFunc(entries[first:], func(a, b rls.Entry) int { return cmp.Compare(a.Key, b.Key) })
	return entries
}

// headerOptions returns h as Envoy header options of action append.
func headerOptions(h http.Header, action corev3.HeaderValueOption_HeaderAppendAction) []*corev3.HeaderValueOption {
	out := make([]*corev3.HeaderValueOption, 0, len(h))
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: action})
		}
	}
	slices.SortFunc(out, func(a, b *corev3.HeaderValueOption) int { return cmp.Compare(a.Header.Key, b.Header.Key) })
	return out
}
