// Package server is Sluice's rate-limit service: the Envoy RLS v3 gRPC API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) with gRPC reflection and
// health, an HTTP JSON API (POST /v1/allow, /json), Prometheus /metrics, /healthz and
// /readyz, and envoyproxy/ratelimit's /healthcheck and /rlconfig, over rules loaded by package
// config and hot-reloaded when their files change.
//
// New listens on the configured addresses (use "127.0.0.1:0" in tests and read the bound
// addresses back), Serve runs until its context ends and then shuts down gracefully. Run does
// both. Embedded in another transport (sluice proxy), a Server with both addresses "-"
// decides in process (Decide) and serves the operators' endpoints (AdminHandler).
//
// Decisions are envoyproxy/ratelimit's (an unknown domain, an unmatched or unlimited
// descriptor are OK without a store call; quota mode, shadow mode, whole-second resets; its
// Prometheus series next to Sluice's) but for the differences docs/OPERATIONS.md lists, each
// with its switch: every limit of every descriptor of a request must pass, and when one does
// not, nothing is consumed from any of them (see Limiter.AllowAll; Config.CountDenied decides
// as the peer). Shadow-mode and quota-mode descriptors are decided on their own. Malformed
// requests are rejected with INVALID_ARGUMENT (HTTP 400) before any store call; an unavailable
// store gives UNAVAILABLE (HTTP 503), so Envoy applies its failure_mode_deny setting.
//
// A rule a request brings (the rule of /v1/allow's key form, a descriptor's limit override)
// is held to ceilings on its sliding-log limit, its period and its state per key
// (Config.MaxRequestLogLimit, MaxRequestPeriod, MaxRequestStateBytes); Config.RequestRules
// restricts requests to limits named from the config, or refuses their rules.
package server
