// Package server is Sluice's rate-limit service: the Envoy RLS v3 gRPC API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) with gRPC reflection and
// health, an HTTP JSON API (POST /v1/allow, /json), Prometheus /metrics, /healthz and
// /readyz, and envoyproxy/ratelimit's /healthcheck and /rlconfig, over rules loaded by package
// config and hot-reloaded when their files change.
//
// The gateways' doors decide the requests a gateway asks about as sluice proxy decides the
// requests it forwards (package internal/gate): forward-auth for NGINX auth_request, Caddy
// forward_auth and Traefik ForwardAuth (forwardauth.go), Envoy's ext_authz over gRPC and
// HTTP (extauthz.go), with what they share in gateways.go.
//
// The descriptor engine (rules, store, decisions, their metrics) is package rls; a Server
// mounts it as it mounts the RLQS quota service (package quota/rlqs): New builds the engine
// from Config's embedded rls.Config, reads each RLS or HTTP request into an rls.Request and
// writes the engine's rls.Answer back as the transport's answer. The operators' endpoints
// (/metrics, /healthz, /readyz, /v1/top, /ui) are package server/admin's.
//
// New listens on the configured addresses (use "127.0.0.1:0" in tests and read the bound
// addresses back), Serve runs until its context ends and then shuts down gracefully. Run does
// both.
//
// Decisions are envoyproxy/ratelimit's but for the differences docs/OPERATIONS.md lists (see
// package rls). Malformed requests are rejected with INVALID_ARGUMENT (HTTP 400) before any
// store call; an unavailable store gives UNAVAILABLE (HTTP 503), so Envoy applies its
// failure_mode_deny setting. A rule a request brings is held to the ceilings of
// rls.Config (MaxRequestLogLimit, MaxRequestPeriod, MaxRequestStateBytes, RequestRules).
package server
