package main

import (
	"flag"
	"fmt"
)

var serveHelp = help{
	synopsis: "sluice serve [flags]",
	description: `
Runs the rate-limit service: Envoy's rate limit service (RLS) over gRPC, the same decisions
as JSON over HTTP (/json, /v1/allow), /metrics, /healthz and /readyz, and the live view /ui;
the gateways' doors decide requests by the rules' proxy sections, as sluice proxy does:
/v1/forward-auth/DOMAIN (NGINX auth_request, Caddy forward_auth, Traefik ForwardAuth) and
Envoy's ext_authz (gRPC on the gRPC port, HTTP at /v1/ext-authz/DOMAIN).
Without --config it serves the embedded example rules (examples/config/rules.yaml). Rules
files are watched and reloaded; a file that does not load keeps the rules in force.

Every flag defaults to the SLUICE_* variable in brackets when it is set; envoyproxy/ratelimit's
variables (named after it) are read too, so its deployments need no change.`,
	groups: []flagGroup{
		{"Rules", []string{"config", "reload-interval", "config-tree", "config-dotfiles", "merge-domains", "default-algorithm"}},
		{"Rules from xDS", []string{"xds-server", "xds-node-id", "xds-node-metadata", "xds-headers", "xds-tls", "xds-tls-ca",
			"xds-tls-cert", "xds-tls-key", "xds-tls-server-name", "xds-backoff-initial", "xds-backoff-max",
			"xds-backoff-random-factor", "xds-backoff-no-jitter", "xds-connect-retry-interval", "xds-max-message-bytes",
			"xds-allow-empty", "ready-without-rules"}},
		{"Store", []string{"store", "mode", "fallback", "store-timeout", "store-prefix", "memory-max-bytes", "quota-store", "store-per-second", "healthcheck-store", "store-srv-refresh"}},
		{"Store TLS", []string{"store-tls", "store-tls-ca", "store-tls-cert", "store-tls-key", "store-tls-server-name", "store-tls-skip-hostname-verification"}},
		{"Regions (limits of scope global)", []string{"region", "regions", "regions-mode", "regions-coordinator", "regions-interval", "regions-epoch", "regions-max-clock-skew"}},
		{"Listeners", []string{"grpc-addr", "http-addr", "metrics-addr", "metrics-path", "debug-addr", "pprof"}},
		{"TLS on the gRPC port", []string{"tls-cert", "tls-key", "tls-client-ca", "tls-client-san"}},
		{"Answers", []string{"headers", "response-header-names", "response-dynamic-metadata", "shadow-mode", "quota-mode", "count-denied", "near-limit-ratio"}},
		{"Gateways (forward-auth, ext_authz)", []string{"trusted-proxies", "gateway-headers", "gateway-in-flight"}},
		{"Rules chosen by requests", []string{"request-rules", "max-request-log-limit", "max-request-period", "max-request-state-bytes"}},
		{"Connections", []string{"http-read-header-timeout", "http-idle-timeout", "http-max-header-bytes", "http-max-conns",
			"grpc-max-connection-age", "grpc-max-connection-age-grace"}},
		{"Tracing", []string{"tracing", "tracing-endpoint", "tracing-exporter-protocol", "tracing-sampling-rate",
			"tracing-service-name", "tracing-service-namespace", "tracing-service-instance-id"}},
		{"Metrics", []string{"metrics-mapping", "metrics-response-time-ms", "statsd-addr", "statsd-protocol", "stats-flush-interval", "stats-tags"}},
		{"Logs", []string{"log-level", "log-format"}},
	},
	examples: []string{
		"sluice serve",
		"sluice serve --config rules.yaml --store redis://127.0.0.1:6379/0 --fallback local",
		"sluice serve --xds-server xds.example:18000 --xds-node-id ratelimit --tls-cert rls.pem --tls-key rls-key.pem --tls-client-ca ca.pem",
		"sluice serve --config /etc/sluice/ --store memcached://10.0.0.1:11211,10.0.0.2:11211 --mode overlimit",
		`curl -s -XPOST localhost:8080/v1/allow -d '{"key":"alice","rule":{"algorithm":"token_bucket","limit":2,"period":"1m"}}'`,
	},
}

// Values of serve's --headers.
const (
	serveHeadersNone      = "none"
	serveHeadersRateLimit = "ratelimit"
)

// registerHeaders defines --headers (the RateLimit-* headers of RLS answers) with its
// default from the environment; --response-headers is its former boolean spelling.
func (f *serveFlags) registerHeaders(fs *flag.FlagSet) {
	def := f.env("response-headers", "SLUICE_RESPONSE_HEADERS", serveHeadersNone)
	fs.StringVar(&f.headers, "headers", def, "rate-limit headers of RLS answers, for Envoy to pass on: ratelimit (RateLimit-Limit, -Remaining and -Reset, named by --response-header-names) or none [SLUICE_RESPONSE_HEADERS, LIMIT_RESPONSE_HEADERS_ENABLED]")
}

// responseHeaders reports whether --headers asks for headers; true and false (the former
// boolean flag's and the environment's values) are taken too.
func (f *serveFlags) responseHeaders() (bool, error) {
	switch f.headers {
	case serveHeadersRateLimit, "true", "1":
		return true, nil
	case serveHeadersNone, "false", "0", "":
		return false, nil
	}
	return false, fmt.Errorf("--headers: want %s or %s, got %q", serveHeadersRateLimit, serveHeadersNone, f.headers)
}
