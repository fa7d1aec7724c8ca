package main

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
)

func envOf(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

// TestPeerEnvMapping: envoyproxy/ratelimit's variables map to serve's flags, one table
// (peerFlags); the values are what the peer's settings.go means by them.
func TestPeerEnvMapping(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want map[string]string // flag -> value; "" means not set
	}{
		// Deliberate difference: without the peer's environment, serve keeps its loopback
		// defaults; the peer listens on 0.0.0.0. Its debug port opens only when asked for
		// (the peer always opens 0.0.0.0:6070).
		{"health follows the store", map[string]string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION": "true"},
			map[string]string{"healthcheck-store": "true"}},
		{"nothing of the peer's", map[string]string{"HOME": "/root"},
			map[string]string{"http-addr": "", "grpc-addr": "", "config": "", "store": "", "debug-addr": "", "statsd-addr": ""}},
		// HOST and PORT are generic names: alone they are not the peer's environment.
		{"a shell that exports PORT and HOST", map[string]string{"PORT": "3000", "HOST": "0.0.0.0"},
			map[string]string{"http-addr": "", "grpc-addr": "", "config": ""}},
		{"the peer's defaults once its environment is detected", map[string]string{"USE_STATSD": "false"},
			map[string]string{"http-addr": "0.0.0.0:8080", "grpc-addr": "0.0.0.0:8081", "config": "/srv/runtime_data/current/config",
				"config-tree": "true", "config-dotfiles": "true", "store": "", "debug-addr": "",
				"grpc-max-connection-age": "24h", "grpc-max-connection-age-grace": "1h"}},
		{"runtime layout and listeners", map[string]string{"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit",
			"RUNTIME_APPDIRECTORY": "rules", "RUNTIME_IGNOREDOTFILES": "true", "HOST": "127.0.0.1", "PORT": "9080",
			"GRPC_PORT": "9081", "DEBUG_PORT": "9070", "GRPC_MAX_CONNECTION_AGE": "30m"},
			map[string]string{"config": "/data/ratelimit/rules", "config-dotfiles": "false", "http-addr": "127.0.0.1:9080",
				"grpc-addr": "0.0.0.0:9081", "debug-addr": "0.0.0.0:9070", "grpc-max-connection-age": "30m"}},
		{"redis single", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "REDIS_AUTH": "s3cret",
			"REDIS_POOL_SIZE": "20", "REDIS_TIMEOUT": "2s", "CACHE_KEY_PREFIX": "rl:", "LOCAL_CACHE_SIZE_IN_BYTES": "1048576"},
			map[string]string{"store": "redis://:s3cret@redis:6379?pool_size=20", "store-timeout": "2s", "store-prefix": "rl:", "mode": "overlimit"}},
		{"redis tls with a user", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6380", "REDIS_AUTH": "app:pw", "REDIS_TLS": "true"},
			map[string]string{"store": "rediss://app:pw@redis:6380"}},
		{"redis cluster", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "CLUSTER", "REDIS_URL": "a:7000,b:7001"},
			map[string]string{"store": "redis-cluster://a:7000,b:7001"}},
		{"redis sentinel", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "sentinel", "REDIS_URL": "mymaster,s1:26379,s2:26379",
			"REDIS_AUTH": "datapw", "REDIS_SENTINEL_AUTH": "sentpw"},
			map[string]string{"store": "redis-sentinel://:sentpw@s1:26379,s2:26379/mymaster?password=datapw"}},
		{"memcache", map[string]string{"BACKEND_TYPE": "memcache", "MEMCACHE_HOST_PORT": "m1:11211, m2:11211"},
			map[string]string{"store": "memcached://m1:11211,m2:11211"}},
		{"per-second redis", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6379", "REDIS_PERSECOND": "true",
			"REDIS_PERSECOND_SOCKET_TYPE": "tcp", "REDIS_PERSECOND_URL": "r2:6379", "REDIS_PERSECOND_AUTH": "pw", "REDIS_PERSECOND_TLS": "true"},
			map[string]string{"store": "redis://r:6379", "store-per-second": "rediss://:pw@r2:6379"}},
		{"per-second redis off", map[string]string{"REDIS_PERSECOND": "false", "REDIS_PERSECOND_URL": "r2:6379"}, map[string]string{"store-per-second": ""}},
		{"redis TLS with client certificates", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6380", "REDIS_TLS": "true",
			"REDIS_TLS_CLIENT_CERT": "/c.pem", "REDIS_TLS_CLIENT_KEY": "/k.pem", "REDIS_TLS_CACERT": "/ca.pem", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION": "true",
			"MEMCACHE_TLS_CACERT": "/other.pem"},
			map[string]string{"store": "rediss://r:6380", "store-tls": "true", "store-tls-cert": "/c.pem", "store-tls-key": "/k.pem",
				"store-tls-ca": "/ca.pem", "store-tls-skip-hostname-verification": "true"}},
		{"memcached TLS", map[string]string{"BACKEND_TYPE": "memcache", "MEMCACHE_HOST_PORT": "m:11211", "MEMCACHE_TLS": "true",
			"MEMCACHE_TLS_CACERT": "/ca.pem", "REDIS_TLS_CACERT": "/other.pem"},
			map[string]string{"store": "memcached://m:11211", "store-tls": "true", "store-tls-ca": "/ca.pem"}},
		{"tracing", map[string]string{"TRACING_ENABLED": "true", "TRACING_SERVICE_NAME": "rl", "TRACING_SERVICE_NAMESPACE": "eg",
			"TRACING_SERVICE_INSTANCE_ID": "pod-1", "TRACING_SAMPLING_RATE": "0.5", "TRACING_EXPORTER_PROTOCOL": "grpc"},
			map[string]string{"tracing": "true", "tracing-service-name": "rl", "tracing-service-namespace": "eg",
				"tracing-service-instance-id": "pod-1", "tracing-sampling-rate": "0.5", "tracing-exporter-protocol": "grpc"}},
		{"gRPC on a Unix socket", map[string]string{"GRPC_UDS": "/run/rl.sock", "GRPC_PORT": "9081"},
			map[string]string{"grpc-addr": "unix:/run/rl.sock"}},
		{"statsd", map[string]string{"USE_STATSD": "true", "STATSD_HOST": "statsd", "STATSD_PORT": "9125", "STATSD_PROTOCOL": "udp",
			"STATS_FLUSH_INTERVAL": "3s", "EXTRA_TAGS": "cluster:eu,pod:a", "PROMETHEUS_MAPPER_YAML": "/etc/mapping.yaml"},
			map[string]string{"statsd-addr": "statsd:9125", "statsd-protocol": "udp", "stats-flush-interval": "3s",
				"stats-tags": "cluster:eu,pod:a", "metrics-mapping": "/etc/mapping.yaml"}},
		{"statsd off", map[string]string{"USE_STATSD": "false", "STATSD_HOST": "statsd"}, map[string]string{"statsd-addr": "", "stats-flush-interval": "10s"}},
		{"stats disabled", map[string]string{"RUNTIME_ROOT": "/data", "DISABLE_STATS": "true"}, map[string]string{"statsd-addr": ""}},
		{"local cache off", map[string]string{"LOCAL_CACHE_SIZE_IN_BYTES": "0"}, map[string]string{"mode": ""}},
		{"response time in ms", map[string]string{"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS": "true"}, map[string]string{"metrics-response-time-ms": "true"}},
		{"modes, headers, metrics, logs", map[string]string{"SHADOW_MODE": "true", "QUOTA_MODE": "true", "LIMIT_RESPONSE_HEADERS_ENABLED": "true",
			"LIMIT_REMAINING_HEADER": "X-Left", "NEAR_LIMIT_RATIO": "0.9", "USE_PROMETHEUS": "true", "PROMETHEUS_PATH": "/prom",
			"LOG_LEVEL": "trace", "LOG_FORMAT": "json", "MERGE_DOMAIN_CONFIG": "true"},
			map[string]string{"shadow-mode": "true", "quota-mode": "true", "response-headers": "true",
				"response-header-names": "RateLimit-Limit,X-Left,RateLimit-Reset", "near-limit-ratio": "0.9",
				"metrics-addr": ":9090", "metrics-path": "/prom", "log-level": "debug", "log-format": "json", "merge-domains": "true"}},
	} {
		e := readPeerEnv(envOf(tc.env))
		if len(e.errs) > 0 || len(e.flagErrs) > 0 {
			t.Errorf("%s: errors %v %v", tc.name, e.errs, e.flagErrs)
		}
		for flag, want := range tc.want {
			if got := e.defaults[flag]; got != want {
				t.Errorf("%s: --%s = %q, want %q", tc.name, flag, got, want)
			}
		}
	}
}

// TestPeerEnvNotHonoured: a setting serve cannot honour is named in a warning, or is an error
// where serving anyway would be wrong; a value that does not map names its variable.
func TestPeerEnvNotHonoured(t *testing.T) {
	if e := readPeerEnv(envOf(map[string]string{"RUNTIME_ROOT": "/data"})); len(e.warnings) != 0 || e.defaults["statsd-addr"] != "localhost:8125" {
		t.Errorf("the peer's default USE_STATSD=true: warnings %v, --statsd-addr %q", e.warnings, e.defaults["statsd-addr"])
	}
	e := readPeerEnv(envOf(map[string]string{"USE_DOG_STATSD": "true", "USE_STATSD": "true", "GRPC_UDS": "/tmp/rl.sock",
		"RESPONSE_DYNAMIC_METADATA": "true", "REDIS_PIPELINE_WINDOW": "150us", "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION": "true"}))
	var named []string
	for _, w := range e.warnings {
		named = append(named, w[0])
	}
	if got := strings.Join(named, ","); got != "USE_DOG_STATSD" {
		t.Errorf("warnings for %s", got)
	}
	for env, want := range map[string]string{
		"REDIS_URL=localhost:6379":                                "REDIS_SOCKET_TYPE=unix",
		"REDIS_TYPE=ring":                                         "REDIS_TYPE",
		"CONFIG_TYPE=GRPC_XDS":                                    "CONFIG_TYPE",
		"GRPC_SERVER_USE_TLS=true":                                "GRPC_SERVER_TLS_CERT",
		"BACKEND_TYPE=memcache":                                   "MEMCACHE_HOST_PORT",
		"RUNTIME_ROOT=/data PORT=http":                            "PORT",
		"REDIS_PERSECOND=true":                                    "REDIS_PERSECOND_URL is empty",
		"REDIS_PERSECOND=true REDIS_PERSECOND_URL=r:1":            "REDIS_PERSECOND_SOCKET_TYPE=unix",
		"REDIS_SOCKET_TYPE=tcp REDIS_TYPE=sentinel REDIS_URL=h:1": "master,host:port",
	} {
		m := map[string]string{}
		for _, kv := range strings.Fields(env) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		if m["REDIS_TYPE"] == "ring" {
			m["REDIS_SOCKET_TYPE"], m["REDIS_URL"] = "tcp", "h:1"
		}
		e := readPeerEnv(envOf(m))
		var msgs []string
		for _, err := range e.flagErrs {
			msgs = append(msgs, err.Error())
		}
		if !strings.Contains(strings.Join(msgs, "; "), want) {
			t.Errorf("%s: errors %q do not name %s", env, msgs, want)
		}
	}
}

// TestPeerEnvPrecedence: a flag beats its SLUICE_* variable, which beats the peer's.
func TestPeerEnvPrecedence(t *testing.T) {
	t.Setenv("PORT", "9999")
	t.Setenv("CACHE_KEY_PREFIX", "peer:")
	t.Setenv("SLUICE_STORE_PREFIX", "sluice-env:")
	f := serveFlags{peer: readPeerEnv(envOf(map[string]string{"PORT": "9999", "CACHE_KEY_PREFIX": "peer:"}))}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	if err := fs.Parse([]string{"--http-addr", "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if f.httpAddr != "127.0.0.1:1" || f.storePrefix != "sluice-env:" {
		t.Errorf("http-addr %q (want the flag's), store-prefix %q (want SLUICE_STORE_PREFIX's)", f.httpAddr, f.storePrefix)
	}
	// A peer value that does not map is moot when the flag is given.
	var out, errOut bytes.Buffer
	t.Setenv("REDIS_URL", "localhost:1") // REDIS_SOCKET_TYPE unix: not supported
	if code := run([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--store", "nosuch://"}, &out, &errOut); code != 1 ||
		strings.Contains(errOut.String(), "REDIS_SOCKET_TYPE") {
		t.Errorf("--store given: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "--store: from envoyproxy/ratelimit's REDIS_SOCKET_TYPE=unix") {
		t.Errorf("REDIS_URL without tcp: exit %d, %q", code, errOut.String())
	}
}

// TestPeerEnvBadValue: a value of the peer's that does not parse is named with its variable.
func TestPeerEnvBadValue(t *testing.T) {
	t.Setenv("NEAR_LIMIT_RATIO", "most")
	var out, errOut bytes.Buffer
	if code := run([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), `--near-limit-ratio: want a number in (0, 1], got "most" (from envoyproxy/ratelimit's NEAR_LIMIT_RATIO)`) {
		t.Errorf("exit %d: %q", code, errOut.String())
	}
}

// peerSettings are the variables of envoyproxy/ratelimit's src/settings/settings.go at commit
// f2fb157, in its order.
const peerSettings = `
HOST PORT DEBUG_HOST DEBUG_PORT GRPC_UDS GRPC_HOST GRPC_PORT GRPC_MAX_CONNECTION_AGE
GRPC_MAX_CONNECTION_AGE_GRACE GRPC_SERVER_USE_TLS GRPC_SERVER_TLS_CERT GRPC_SERVER_TLS_KEY
GRPC_CLIENT_TLS_CACERT GRPC_CLIENT_TLS_SAN LOG_LEVEL LOG_FORMAT CONFIG_TYPE
FORCE_START_WITHOUT_INITIAL_CONFIG CONFIG_GRPC_XDS_NODE_ID CONFIG_GRPC_XDS_NODE_METADATA
CONFIG_GRPC_XDS_SERVER_URL CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL
CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS CONFIG_GRPC_XDS_SERVER_USE_TLS
CONFIG_GRPC_XDS_CLIENT_TLS_CERT CONFIG_GRPC_XDS_CLIENT_TLS_KEY CONFIG_GRPC_XDS_SERVER_TLS_CACERT
CONFIG_GRPC_XDS_SERVER_TLS_SAN XDS_CLIENT_BACKOFF_INITIAL_INTERVAL
XDS_CLIENT_BACKOFF_MAX_INTERVAL XDS_CLIENT_BACKOFF_RANDOM_FACTOR XDS_CLIENT_BACKOFF_JITTER
XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES USE_DOG_STATSD USE_DOG_STATSD_MOGRIFIERS USE_STATSD STATSD_HOST
STATSD_PORT EXTRA_TAGS STATS_FLUSH_INTERVAL DISABLE_STATS USE_PROMETHEUS PROMETHEUS_ADDR
PROMETHEUS_PATH PROMETHEUS_MAPPER_YAML PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS RUNTIME_ROOT
RUNTIME_SUBDIRECTORY RUNTIME_APPDIRECTORY RUNTIME_IGNOREDOTFILES RUNTIME_WATCH_ROOT
EXPIRATION_JITTER_MAX_SECONDS LOCAL_CACHE_SIZE_IN_BYTES NEAR_LIMIT_RATIO CACHE_KEY_PREFIX
BACKEND_TYPE STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT LIMIT_RESPONSE_HEADERS_ENABLED
LIMIT_LIMIT_HEADER LIMIT_REMAINING_HEADER LIMIT_RESET_HEADER
HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED REDIS_SOCKET_TYPE REDIS_TYPE REDIS_URL REDIS_POOL_SIZE
REDIS_AUTH REDIS_TLS REDIS_TLS_CLIENT_CERT REDIS_TLS_CLIENT_KEY REDIS_TLS_CACERT
REDIS_TLS_SKIP_HOSTNAME_VERIFICATION REDIS_PIPELINE_WINDOW REDIS_PIPELINE_LIMIT
REDIS_CLUSTER_PIPELINE_PARALLELISM REDIS_PERSECOND REDIS_PERSECOND_SOCKET_TYPE
REDIS_PERSECOND_TYPE REDIS_PERSECOND_URL REDIS_PERSECOND_POOL_SIZE REDIS_PERSECOND_AUTH
REDIS_PERSECOND_TLS REDIS_SENTINEL_AUTH REDIS_PERSECOND_SENTINEL_AUTH
REDIS_PERSECOND_PIPELINE_WINDOW REDIS_PERSECOND_PIPELINE_LIMIT
REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM REDIS_HEALTH_CHECK_ACTIVE_CONNECTION REDIS_TIMEOUT
REDIS_PERSECOND_TIMEOUT REDIS_POOL_ON_EMPTY_BEHAVIOR REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR
REDIS_STARTUP_INITIAL_INTERVAL REDIS_STARTUP_MAX_INTERVAL REDIS_STARTUP_MAX_ELAPSED_TIME
MEMCACHE_HOST_PORT MEMCACHE_MAX_IDLE_CONNS MEMCACHE_SRV MEMCACHE_SRV_REFRESH MEMCACHE_TLS
MEMCACHE_TLS_CLIENT_CERT MEMCACHE_TLS_CLIENT_KEY MEMCACHE_TLS_CACERT
MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION SHADOW_MODE QUOTA_MODE RESPONSE_DYNAMIC_METADATA
MERGE_DOMAIN_CONFIG TRACING_ENABLED TRACING_SERVICE_NAME TRACING_SERVICE_NAMESPACE
TRACING_SERVICE_INSTANCE_ID TRACING_EXPORTER_PROTOCOL TRACING_SAMPLING_RATE
`

// TestPeerEnvEveryVariable: every variable of the peer's settings is mapped to a flag, or
// named at start-up (a warning, an error, or "no effect"), or only tunes one that is: none is
// ignored silently.
func TestPeerEnvEveryVariable(t *testing.T) {
	handled := peerVariables()
	for v, on := range peerSubordinate {
		if _, sub := peerSubordinate[on]; !handled[on] || sub {
			t.Errorf("%s tunes %s, which is not handled on its own", v, on)
		}
	}
	for _, v := range strings.Fields(peerSettings) {
		if !handled[v] {
			t.Errorf("%s: neither mapped nor named", v)
		}
	}
}
