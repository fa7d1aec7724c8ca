package main

import "strings"

// envoyproxy/ratelimit's variables of TLS to the store (storetls.go's flags) and of
// OpenTelemetry tracing (tracing.go's flags). The store's come in two spellings, REDIS_TLS*
// and MEMCACHE_TLS*: BACKEND_TYPE chooses which one applies, as in the peer.

func init() {
	peerFlags = append(peerFlags,
		peerFlag{"store-tls", []string{"REDIS_TLS", "MEMCACHE_TLS"}, func(e *peerEnv) (string, bool, error) {
			return boolean(storeTLSVar(e, "TLS"))(e)
		}},
		peerFlag{"store-tls-ca", []string{"REDIS_TLS_CACERT", "MEMCACHE_TLS_CACERT"}, storeTLSFile("TLS_CACERT")},
		peerFlag{"store-tls-cert", []string{"REDIS_TLS_CLIENT_CERT", "MEMCACHE_TLS_CLIENT_CERT"}, storeTLSFile("TLS_CLIENT_CERT")},
		peerFlag{"store-tls-key", []string{"REDIS_TLS_CLIENT_KEY", "MEMCACHE_TLS_CLIENT_KEY"}, storeTLSFile("TLS_CLIENT_KEY")},
		peerFlag{"store-tls-skip-hostname-verification", []string{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION"},
			func(e *peerEnv) (string, bool, error) {
				return boolean(storeTLSVar(e, "TLS_SKIP_HOSTNAME_VERIFICATION"))(e)
			}},
		peerFlag{"tracing", []string{"TRACING_ENABLED"}, boolean("TRACING_ENABLED")},
		peerFlag{"tracing-service-name", []string{"TRACING_SERVICE_NAME"}, verbatim("TRACING_SERVICE_NAME")},
		peerFlag{"tracing-service-namespace", []string{"TRACING_SERVICE_NAMESPACE"}, verbatim("TRACING_SERVICE_NAMESPACE")},
		peerFlag{"tracing-service-instance-id", []string{"TRACING_SERVICE_INSTANCE_ID"}, verbatim("TRACING_SERVICE_INSTANCE_ID")},
		peerFlag{"tracing-sampling-rate", []string{"TRACING_SAMPLING_RATE"}, verbatim("TRACING_SAMPLING_RATE")},
		peerFlag{"tracing-exporter-protocol", []string{"TRACING_EXPORTER_PROTOCOL"}, verbatim("TRACING_EXPORTER_PROTOCOL")},
	)
}

// storeTLSVar is the name of the store TLS variable suffix (TLS, TLS_CACERT, ...) of the
// backend BACKEND_TYPE chooses: REDIS_ or MEMCACHE_.
func storeTLSVar(e *peerEnv, suffix string) string {
	if strings.EqualFold(e.or("BACKEND_TYPE", "redis"), "memcache") {
		return "MEMCACHE_" + suffix
	}
	return "REDIS_" + suffix
}

// storeTLSFile maps the file variable of suffix of the chosen backend.
func storeTLSFile(suffix string) func(e *peerEnv) (string, bool, error) {
	return func(e *peerEnv) (string, bool, error) { return verbatim(storeTLSVar(e, suffix))(e) }
}
