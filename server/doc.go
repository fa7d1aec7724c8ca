// Package server is Sluice's rate-limit service: the Envoy RLS v3 gRPC API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) with gRPC reflection and
// health, an HTTP JSON API (POST /v1/allow, POST /json), Prometheus /metrics, /healthz and
// /readyz, over rules loaded by package config and hot-reloaded when their files change.
//
// New listens on the configured addresses (use "127.0.0.1:0" in tests and read the bound
// addresses back), Serve runs until its context ends and then shuts down gracefully. Run does
// both. Embedded in another transport (sluice proxy), a Server with both addresses "-"
// decides in process (Decide) and serves the operators' endpoints (AdminHandler).
//
// Decisions follow one policy: every limit of every descriptor of a request must pass; when
// one does not, nothing is consumed from any of them (see Limiter.AllowAll). Shadow-mode
// descriptors are decided on their own, counted, and always answered OK. Unlimited descriptors
// and descriptors that match no rule are answered OK without a store call. Malformed requests
// are rejected with INVALID_ARGUMENT (HTTP 400) before any store call; an unavailable store
// gives UNAVAILABLE (HTTP 503), so Envoy applies its failure_mode_deny setting.
//
// A rule a request brings (the rule of /v1/allow's key form, a descriptor's limit override)
// is held to ceilings on its sliding-log limit, its period and its state per key
// (Config.MaxRequestLogLimit, MaxRequestPeriod, MaxRequestStateBytes); Config.RequestRules
// restricts requests to limits named from the config, or refuses their rules.
package server
