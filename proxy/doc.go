// Package proxy is `sluice proxy`: a rate-limiting reverse proxy (net/http/httputil's
// ReverseProxy) in front of any HTTP upstream, so that a service can be limited without a
// change to its code.
//
// Each request is turned into descriptors by the proxy section of the rules (Envoy's
// rate-limit actions: remote_address with trusted proxies, request_headers, generic_key,
// header_value_match, and Sluice's path, route prefixes and method; see config.Proxy), decided
// against the same descriptor rules as `sluice serve` by the same engine (rls.Engine.Decide),
// with the same store, distribution mode and fallback: package internal/gate's decision,
// which sluice serve's forward-auth and ext_authz doors make too. A denied request gets
// package httplimit's 429; an allowed one is forwarded with the same rate-limit headers, its
// body, trailers, streaming responses and WebSocket upgrades passing untouched. /metrics,
// /healthz and /readyz are served on a separate admin address, loopback by default.
package proxy
