package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/peerstats"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/server"
)

// envoyproxy/ratelimit's statsd stats (package internal/peerstats) and the serve flags that
// carry its stats variables over: USE_STATSD (the peer's default: true), STATSD_HOST,
// STATSD_PORT, STATSD_PROTOCOL (read by its statsd client), STATS_FLUSH_INTERVAL, EXTRA_TAGS
// and PROMETHEUS_MAPPER_YAML.

func init() {
	peerFlags = append(peerFlags,
		peerFlag{"statsd-addr", []string{"USE_STATSD", "STATSD_HOST", "STATSD_PORT", "DISABLE_STATS"}, func(e *peerEnv) (string, bool, error) {
			on := e.detected // the peer sends statsd unless told not to
			if off, err := e.boolean("DISABLE_STATS"); off || err != nil {
				return "", false, err // the peer's null sink
			}
			if e.has("USE_STATSD") {
				var err error
				if on, err = e.boolean("USE_STATSD"); err != nil {
					return "", false, err
				}
			}
			if !on {
				return "", false, nil
			}
			port := e.or("STATSD_PORT", "8125")
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return "", false, fmt.Errorf("STATSD_PORT: want a port number, got %q", port)
			}
			return net.JoinHostPort(e.or("STATSD_HOST", "localhost"), port), true, nil
		}},
		peerFlag{"statsd-protocol", []string{"STATSD_PROTOCOL"}, verbatim("STATSD_PROTOCOL")},
		peerFlag{"stats-flush-interval", []string{"STATS_FLUSH_INTERVAL"}, duration("STATS_FLUSH_INTERVAL", "10s")},
		peerFlag{"stats-tags", []string{"EXTRA_TAGS"}, verbatim("EXTRA_TAGS")},
		peerFlag{"metrics-mapping", []string{"PROMETHEUS_MAPPER_YAML"}, verbatim("PROMETHEUS_MAPPER_YAML")},
		peerFlag{"store-per-second", []string{"REDIS_PERSECOND", "REDIS_PERSECOND_URL", "REDIS_PERSECOND_SOCKET_TYPE", "REDIS_PERSECOND_TYPE",
			"REDIS_PERSECOND_AUTH", "REDIS_PERSECOND_TLS", "REDIS_PERSECOND_POOL_SIZE", "REDIS_PERSECOND_SENTINEL_AUTH"}, func(e *peerEnv) (string, bool, error) {
			on, err := e.boolean("REDIS_PERSECOND")
			if err != nil || !on || !strings.EqualFold(e.or("BACKEND_TYPE", "redis"), "redis") {
				return "", false, err
			}
			if !e.has("REDIS_PERSECOND_URL") {
				return "", false, errors.New("REDIS_PERSECOND=true: REDIS_PERSECOND_URL is empty (want host:port)")
			}
			return peerRedis(e, "REDIS_PERSECOND_")
		}},
		peerFlag{"response-dynamic-metadata", []string{"RESPONSE_DYNAMIC_METADATA"}, boolean("RESPONSE_DYNAMIC_METADATA")},
		peerFlag{"healthcheck-store", []string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION"}, boolean("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION")},
	)
}

// peerExtraFlags are the flags of the peer's stats, its per-second Redis and its response
// dynamic metadata.
type peerExtraFlags struct {
	statsdAddr, statsdProtocol, tags, mapping string
	flushInterval                             time.Duration
	dynamicMetadata                           bool   // RESPONSE_DYNAMIC_METADATA
	healthcheckStore                          bool   // REDIS_HEALTH_CHECK_ACTIVE_CONNECTION
	perSecondStore                            string // REDIS_PERSECOND*
	responseTimeMS                            bool   // PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS

	srvRefresh time.Duration // MEMCACHE_SRV_REFRESH (srvrefresh.go)
}

func (f *serveFlags) registerStats(fs *flag.FlagSet) {
	s := &f.stats
	fs.StringVar(&s.statsdAddr, "statsd-addr", f.env("statsd-addr", "SLUICE_STATSD_ADDR", ""), "send envoyproxy/ratelimit's statsd stats (ratelimit.service.rate_limit.<key>.total_hits, ...) to this host:port; empty: none [SLUICE_STATSD_ADDR, USE_STATSD+STATSD_HOST+STATSD_PORT]")
	fs.StringVar(&s.statsdProtocol, "statsd-protocol", f.env("statsd-protocol", "SLUICE_STATSD_PROTOCOL", "tcp"), "protocol of --statsd-addr: tcp or udp [SLUICE_STATSD_PROTOCOL, STATSD_PROTOCOL]")
	fs.DurationVar(&s.flushInterval, "stats-flush-interval", f.envDuration("stats-flush-interval", "SLUICE_STATS_FLUSH_INTERVAL", f.peerDurationOr("stats-flush-interval", peerstats.DefaultFlushInterval)), "how often the statsd stats are sent [SLUICE_STATS_FLUSH_INTERVAL, STATS_FLUSH_INTERVAL]")
	fs.StringVar(&s.tags, "stats-tags", f.env("stats-tags", "SLUICE_STATS_TAGS", ""), "tags added to every statsd stat: name:value,name:value [SLUICE_STATS_TAGS, EXTRA_TAGS]")
	fs.BoolVar(&s.dynamicMetadata, "response-dynamic-metadata", f.envBool("response-dynamic-metadata", "SLUICE_RESPONSE_DYNAMIC_METADATA"), "add the request (domain, descriptors, hits) and the metadata of the limits it passed to each RLS response's dynamic_metadata [SLUICE_RESPONSE_DYNAMIC_METADATA, RESPONSE_DYNAMIC_METADATA]")
	fs.BoolVar(&s.healthcheckStore, "healthcheck-store", f.envBool("healthcheck-store", "SLUICE_HEALTHCHECK_STORE"), "/healthcheck and gRPC health also fail while the store cannot take a write or a fallback decides for it (off: they follow the process and its rules; /readyz probes the store) [SLUICE_HEALTHCHECK_STORE, REDIS_HEALTH_CHECK_ACTIVE_CONNECTION]")
	fs.StringVar(&s.perSecondStore, "store-per-second", f.env("store-per-second", "SLUICE_STORE_PER_SECOND", ""), "a second store URL (as --store) for the limits of a one-second unit, envoyproxy/ratelimit's per-second Redis; empty: --store decides them too [SLUICE_STORE_PER_SECOND, REDIS_PERSECOND+REDIS_PERSECOND_*]")
	fs.DurationVar(&s.srvRefresh, "store-srv-refresh", f.envDuration("store-srv-refresh", "SLUICE_STORE_SRV_REFRESH", f.peerDuration("store-srv-refresh")), "look MEMCACHE_SRV's DNS SRV record up again this often and swap the memcached servers for its targets (a failed look-up keeps them); 0: only at start [SLUICE_STORE_SRV_REFRESH, MEMCACHE_SRV_REFRESH]")
	fs.BoolVar(&s.responseTimeMS, "metrics-response-time-ms", f.envBool("metrics-response-time-ms", "SLUICE_METRICS_RESPONSE_TIME_MS"), "record ratelimit_service_response_time_seconds in whole milliseconds (same name and buckets), as envoyproxy/ratelimit does with PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS [SLUICE_METRICS_RESPONSE_TIME_MS, PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS]")
	fs.StringVar(&s.mapping, "metrics-mapping", f.env("metrics-mapping", "SLUICE_METRICS_MAPPING", ""), "a statsd_exporter mapping file: --metrics-addr serves the series it makes of the statsd stats, in place of the default mapping's ratelimit_service_* [SLUICE_METRICS_MAPPING, PROMETHEUS_MAPPER_YAML]")
}

// parseTags parses name:value,name:value (the peer's EXTRA_TAGS).
func parseTags(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	tags := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), ":")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("want name:value,name:value, got %q", s)
		}
		tags[k] = v
	}
	return tags, nil
}

// startStats sets --response-dynamic-metadata and checks the stats flags and, when they
// send the stats anywhere, starts sending them: cfg counts them, and with a mapping file its --metrics-addr serves the mapped series.
// The returned func sends the last counts.
func (f *serveFlags) startStats(fs *flag.FlagSet, cfg *server.Config, log *slog.Logger) (func(), error) {
	s := f.stats
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, name := range []string{"stats-flush-interval", "response-dynamic-metadata", "healthcheck-store", "metrics-response-time-ms"} {
		if msg, ok := f.envErrs[name]; ok && !given[name] {
			return nil, errors.New(msg)
		}
	}
	cfg.ResponseDynamicMetadata, cfg.ResponseTimeMilliseconds = s.dynamicMetadata, s.responseTimeMS
	cfg.HealthcheckStore = s.healthcheckStore
	if s.flushInterval <= 0 {
		return nil, fmt.Errorf("--stats-flush-interval: must be positive, got %v", s.flushInterval)
	}
	tags, err := parseTags(s.tags)
	if err != nil {
		return nil, fmt.Errorf("--stats-tags: %w%s", err, f.fromPeer(given, "stats-tags", s.tags))
	}
	if p := strings.ToLower(s.statsdProtocol); p != "tcp" && p != "udp" {
		return nil, fmt.Errorf("--statsd-protocol: want tcp or udp, got %q%s", s.statsdProtocol, f.fromPeer(given, "statsd-protocol", s.statsdProtocol))
	}
	mapping := s.mapping
	if mapping != "" && cfg.MetricsAddr == "" {
		log.Warn("--metrics-mapping without --metrics-addr: the mapping is not applied (envoyproxy/ratelimit applies PROMETHEUS_MAPPER_YAML on PROMETHEUS_ADDR, with USE_PROMETHEUS=true)", "mapping", mapping)
		mapping = ""
	}
	st, err := peerstats.Start(peerstats.Config{StatsdAddr: s.statsdAddr, StatsdProtocol: s.statsdProtocol,
		FlushInterval: s.flushInterval, MapperFile: mapping, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("--statsd-addr, --metrics-mapping: %w", err)
	}
	if st == nil {
		return func() {}, nil
	}
	cfg.PeerStats, cfg.PeerStatsTags = st.Store, tags
	if st.Mapped != nil {
		if cfg.Registry == nil {
			cfg.Registry = prometheus.NewRegistry()
		}
		cfg.MetricsGatherer = peerstats.Gatherer(st.Mapped, cfg.Registry)
	}
	log.Info("envoyproxy/ratelimit's statsd stats", "statsd", s.statsdAddr, "protocol", s.statsdProtocol,
		"flush_interval", s.flushInterval, "mapping", mapping)
	return st.Close, nil
}

// peerMemcache is the memcached store of BACKEND_TYPE=memcache: MEMCACHE_HOST_PORT, or the
// servers of MEMCACHE_SRV's DNS SRV record, looked up at start (and every
// MEMCACHE_SRV_REFRESH: srvrefresh.go).
func peerMemcache(e *peerEnv) (string, bool, error) {
	hosts := strings.ReplaceAll(e.or("MEMCACHE_HOST_PORT", ""), " ", "")
	srv := e.or("MEMCACHE_SRV", "")
	switch {
	case hosts != "" && srv != "":
		return "", false, errors.New("BACKEND_TYPE=memcache: both MEMCACHE_HOST_PORT and MEMCACHE_SRV are set (want one)")
	case hosts != "":
		return "memcached://" + hosts, true, nil
	case srv == "":
		return "", false, errors.New("BACKEND_TYPE=memcache: MEMCACHE_HOST_PORT and MEMCACHE_SRV are empty (want host:port,host:port or an SRV name)")
	}
	recs, err := e.srv(srv)
	if err != nil || len(recs) == 0 {
		return "", false, fmt.Errorf("MEMCACHE_SRV: no servers from the SRV record %q: %v", srv, err)
	}
	return "memcached://" + strings.Join(srvAddrs(recs), ","), true, nil
}

// sluiceEnvPrefix names serve's own variables.
const sluiceEnvPrefix = "SLUICE_"

// logEnv logs, once at start-up, every setting taken from the environment: serve's SLUICE_*
// variables and the peer's, each with its value, secrets masked (maskSecret).
func (f *serveFlags) logEnv(log *slog.Logger) {
	known := peerVariables()
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, sluiceEnvPrefix) && !known[name] {
			continue
		}
		if _, ok := f.peer.get(name); !ok && !strings.HasPrefix(name, sluiceEnvPrefix) {
			continue
		}
		log.Info("setting from the environment", "name", name, "value", maskSecret(name, value))
	}
	if !f.peer.detected {
		for _, v := range []string{"HOST", "PORT"} {
			if val, ok := f.peer.get(v); ok && val != "" {
				log.Info("generic variable ignored outside envoyproxy/ratelimit's environment: --http-addr (SLUICE_HTTP_ADDR) sets the listener", "name", v, "value", maskSecret(v, val))
			}
		}
		return
	}
	if _, set := os.LookupEnv("SLUICE_HTTP_ADDR"); !set && f.httpAddr == f.peer.defaults["http-addr"] {
		if host, _, err := net.SplitHostPort(f.httpAddr); err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
			log.Warn("listening on every interface, as envoyproxy/ratelimit does, from its HOST and PORT (or their defaults): --http-addr or SLUICE_HTTP_ADDR narrows it",
				"http", f.httpAddr, "HOST", f.peer.or("HOST", ""), "PORT", f.peer.or("PORT", ""))
		}
	}
}

// peerVariables are the names of the peer's variables serve reads.
func peerVariables() map[string]bool {
	known := map[string]bool{}
	for _, row := range peerFlags {
		for _, v := range row.vars {
			known[v] = true
		}
	}
	for _, u := range peerUnhonoured {
		known[u.env] = true
	}
	for _, n := range peerNoEffect {
		known[n.env] = true
	}
	for v := range peerSubordinate {
		known[v] = true
	}
	return known
}

// maskSecret is the value of the variable name fit for a log line, by an allow-list
// (internal/redact): the value as it is only for a variable of shownVariables, URLs in it
// with only their harmless parts, and "xxxxx" for everything else, so a variable nobody
// listed (a header, a token, a password under any name) is never printed.
func maskSecret(name, value string) string { return redact.Setting(value, shownVariables[name]) }

// shownVariables are the variables serve and proxy read whose values hold no secret: numbers,
// durations, booleans, addresses, paths, names of modes and formats. Those that may hold one
// are not here — REDIS_AUTH and the other *_AUTH, CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS
// and SLUICE_XDS_HEADERS (authorization metadata), the node metadata — nor is any variable
// added later until someone lists it.
var shownVariables = func() map[string]bool {
	m := map[string]bool{}
	for _, v := range strings.Fields(`
		BACKEND_TYPE CACHE_KEY_PREFIX CONFIG_GRPC_XDS_CLIENT_TLS_CERT CONFIG_GRPC_XDS_CLIENT_TLS_KEY
		CONFIG_GRPC_XDS_NODE_ID CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL CONFIG_GRPC_XDS_SERVER_TLS_CACERT
		CONFIG_GRPC_XDS_SERVER_TLS_SAN CONFIG_GRPC_XDS_SERVER_URL CONFIG_GRPC_XDS_SERVER_USE_TLS CONFIG_TYPE
		DEBUG_HOST DEBUG_PORT DISABLE_STATS EXPIRATION_JITTER_MAX_SECONDS FORCE_START_WITHOUT_INITIAL_CONFIG
		GRPC_CLIENT_TLS_CACERT GRPC_CLIENT_TLS_SAN GRPC_HOST GRPC_MAX_CONNECTION_AGE GRPC_MAX_CONNECTION_AGE_GRACE
		GRPC_PORT GRPC_SERVER_TLS_CA_CERT GRPC_SERVER_TLS_CERT GRPC_SERVER_TLS_KEY GRPC_SERVER_USE_TLS GRPC_UDS
		HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED HOST LIMIT_LIMIT_HEADER LIMIT_REMAINING_HEADER LIMIT_RESET_HEADER
		LIMIT_RESPONSE_HEADERS_ENABLED LOCAL_CACHE_SIZE_IN_BYTES LOG_FORMAT LOG_LEVEL MEMCACHE_HOST_PORT
		MEMCACHE_MAX_IDLE_CONNS MEMCACHE_SRV MEMCACHE_SRV_REFRESH MEMCACHE_TLS MEMCACHE_TLS_CACERT
		MEMCACHE_TLS_CLIENT_CERT MEMCACHE_TLS_CLIENT_KEY MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION MERGE_DOMAIN_CONFIG
		NEAR_LIMIT_RATIO PORT PROMETHEUS_ADDR PROMETHEUS_MAPPER_YAML PROMETHEUS_PATH
		PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS QUOTA_MODE REDIS_CLUSTER_PIPELINE_PARALLELISM
		REDIS_HEALTH_CHECK_ACTIVE_CONNECTION REDIS_PERSECOND REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM
		REDIS_PERSECOND_PIPELINE_LIMIT REDIS_PERSECOND_PIPELINE_WINDOW REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR
		REDIS_PERSECOND_POOL_SIZE REDIS_PERSECOND_SOCKET_TYPE REDIS_PERSECOND_TIMEOUT REDIS_PERSECOND_TLS
		REDIS_PERSECOND_TYPE REDIS_PERSECOND_URL REDIS_PIPELINE_LIMIT REDIS_PIPELINE_WINDOW
		REDIS_POOL_ON_EMPTY_BEHAVIOR REDIS_POOL_SIZE REDIS_SOCKET_TYPE REDIS_STARTUP_INITIAL_INTERVAL
		REDIS_STARTUP_MAX_ELAPSED_TIME REDIS_STARTUP_MAX_INTERVAL REDIS_TIMEOUT REDIS_TLS REDIS_TLS_CACERT
		REDIS_TLS_CLIENT_CERT REDIS_TLS_CLIENT_KEY REDIS_TLS_SKIP_HOSTNAME_VERIFICATION REDIS_TYPE REDIS_URL
		RESPONSE_DYNAMIC_METADATA RUNTIME_APPDIRECTORY RUNTIME_IGNOREDOTFILES RUNTIME_ROOT RUNTIME_SUBDIRECTORY
		RUNTIME_WATCH_ROOT SHADOW_MODE STATSD_HOST STATSD_PORT STATSD_PROTOCOL STATS_FLUSH_INTERVAL
		STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT TRACING_ENABLED TRACING_EXPORTER_PROTOCOL TRACING_SAMPLING_RATE
		TRACING_SERVICE_INSTANCE_ID TRACING_SERVICE_NAME TRACING_SERVICE_NAMESPACE USE_DOG_STATSD
		USE_DOG_STATSD_MOGRIFIERS USE_PROMETHEUS USE_STATSD XDS_CLIENT_BACKOFF_INITIAL_INTERVAL
		XDS_CLIENT_BACKOFF_JITTER XDS_CLIENT_BACKOFF_MAX_INTERVAL XDS_CLIENT_BACKOFF_RANDOM_FACTOR
		XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES
		SLUICE_ADMIN_ADDR SLUICE_ADMIN_PUBLIC SLUICE_CONFIG SLUICE_CONFIG_DOTFILES SLUICE_CONFIG_TREE
		SLUICE_COUNT_DENIED SLUICE_DEBUG_ADDR SLUICE_DEFAULT_ALGORITHM SLUICE_FALLBACK SLUICE_GATEWAY_HEADERS
		SLUICE_GATEWAY_IN_FLIGHT SLUICE_GRPC_ADDR
		SLUICE_GRPC_MAX_CONNECTION_AGE SLUICE_GRPC_MAX_CONNECTION_AGE_GRACE SLUICE_HEALTHCHECK_STORE
		SLUICE_HTTP_ADDR SLUICE_HTTP_IDLE_TIMEOUT SLUICE_HTTP_MAX_CONNS SLUICE_HTTP_MAX_HEADER_BYTES
		SLUICE_MAX_LEASE SLUICE_REGION SLUICE_REGIONS SLUICE_REGIONS_COORDINATOR SLUICE_REGIONS_EPOCH
		SLUICE_REGIONS_INTERVAL SLUICE_REGIONS_MAX_CLOCK_SKEW SLUICE_REGIONS_MODE SLUICE_XDS_ALLOW_EMPTY
		SLUICE_HTTP_READ_HEADER_TIMEOUT SLUICE_FD_SPARE SLUICE_PROXY_MAX_CONNS SLUICE_REQUEST_BODY_TIMEOUT SLUICE_LOG_FORMAT SLUICE_LOG_LEVEL SLUICE_MAX_REQUEST_LOG_LIMIT
		SLUICE_MAX_REQUEST_PERIOD SLUICE_MAX_REQUEST_STATE_BYTES SLUICE_MEMORY_MAX_BYTES SLUICE_MERGE_DOMAINS
		SLUICE_METRICS_ADDR SLUICE_METRICS_MAPPING SLUICE_METRICS_PATH SLUICE_METRICS_RESPONSE_TIME_MS SLUICE_MODE
		SLUICE_NEAR_LIMIT_RATIO SLUICE_PPROF_ADDR SLUICE_PROXY_ADDR SLUICE_QUOTA_MODE SLUICE_QUOTA_STORE
		SLUICE_RATELIMIT_HEADERS SLUICE_READY_WITHOUT_RULES SLUICE_RELOAD_INTERVAL SLUICE_REQUEST_RULES
		SLUICE_RESPONSE_DYNAMIC_METADATA SLUICE_RESPONSE_HEADERS SLUICE_RESPONSE_HEADER_NAMES SLUICE_SHADOW_MODE
		SLUICE_SHUTDOWN_TIMEOUT SLUICE_STATSD_ADDR SLUICE_STATSD_PROTOCOL SLUICE_STATS_FLUSH_INTERVAL
		SLUICE_STATS_TAGS SLUICE_STORE SLUICE_STORE_PER_SECOND SLUICE_STORE_PREFIX SLUICE_STORE_SRV_REFRESH
		SLUICE_STORE_TIMEOUT SLUICE_STORE_TLS SLUICE_STORE_TLS_CA SLUICE_STORE_TLS_CERT SLUICE_STORE_TLS_KEY
		SLUICE_STORE_TLS_SERVER_NAME SLUICE_STORE_TLS_SKIP_HOSTNAME_VERIFICATION SLUICE_TLS_CERT
		SLUICE_TLS_CLIENT_CA SLUICE_TLS_CLIENT_SAN SLUICE_TLS_KEY SLUICE_TRACING SLUICE_TRACING_ENDPOINT
		SLUICE_TRACING_EXPORTER_PROTOCOL SLUICE_TRACING_SAMPLING_RATE SLUICE_TRACING_SERVICE_INSTANCE_ID
		SLUICE_TRACING_SERVICE_NAME SLUICE_TRACING_SERVICE_NAMESPACE SLUICE_TRUSTED_PROXIES SLUICE_UPSTREAM
		SLUICE_UPSTREAM_IDLE_TIMEOUT SLUICE_UPSTREAM_RESPONSE_HEADER_TIMEOUT SLUICE_XDS_BACKOFF_INITIAL
		SLUICE_XDS_BACKOFF_MAX SLUICE_XDS_BACKOFF_NO_JITTER SLUICE_XDS_BACKOFF_RANDOM_FACTOR
		SLUICE_XDS_CONNECT_RETRY_INTERVAL SLUICE_XDS_MAX_MESSAGE_BYTES SLUICE_XDS_NODE_ID SLUICE_XDS_SERVER
		SLUICE_XDS_TLS SLUICE_XDS_TLS_CA SLUICE_XDS_TLS_CERT SLUICE_XDS_TLS_KEY SLUICE_XDS_TLS_SERVER_NAME`) {
		m[v] = true
	}
	return m
}()
