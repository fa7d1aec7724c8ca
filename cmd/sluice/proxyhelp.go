package main

var proxyHelp = help{
	synopsis: "sluice proxy --upstream URL --config PATH [flags]",
	description: `
Runs a rate-limiting reverse proxy in front of an HTTP upstream: each request becomes
descriptors by the proxy section of the rules (its actions), is decided against their limits,
and is forwarded or answered 429 with Retry-After and the rate-limit headers. /metrics,
/healthz, /readyz, /v1/top and the live view /ui are on --admin-addr.

Every flag defaults to the SLUICE_* variable in brackets when it is set.`,
	groups: []flagGroup{
		{"Upstream", []string{"upstream", "upstream-response-header-timeout", "upstream-idle-timeout", "trusted-proxies"}},
		{"Rules", []string{"config", "reload-interval", "max-lease"}},
		{"Store", []string{"store", "mode", "fallback", "store-timeout", "store-prefix"}},
		{"Store TLS", []string{"store-tls", "store-tls-ca", "store-tls-cert", "store-tls-key", "store-tls-server-name", "store-tls-skip-hostname-verification"}},
		{"Regions (limits of scope global)", []string{"region", "regions", "regions-mode", "regions-coordinator", "regions-interval", "regions-epoch", "regions-max-clock-skew"}},
		{"Listeners", []string{"http-addr", "admin-addr", "admin-public", "shutdown-timeout"}},
		{"Clients", []string{"max-conns", "fd-spare", "request-body-timeout"}},
		{"Answers", []string{"headers"}},
		{"Logs", []string{"log-level", "log-format"}},
	},
	examples: []string{
		"sluice proxy --upstream http://127.0.0.1:3000 --config examples/config",
		"sluice proxy --upstream http://app:3000 --config /etc/sluice/ --store redis://redis:6379/0 --http-addr :8000 --trusted-proxies 10.0.0.0/8",
	},
}
