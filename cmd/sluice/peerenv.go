package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/server"
)

// envoyproxy/ratelimit's environment, read by sluice serve so that swapping the container
// image is enough. Precedence: a flag given on the command line, then its SLUICE_* variable,
// then what the peer's variables say (this file), then serve's own default. Every peer
// variable serve reads is in peerFlags (it sets a flag) or peerUnhonoured (it cannot be
// honoured: a start-up warning, or an error where serving anyway would be wrong); the table
// in docs/OPERATIONS.md lists the same.

// peerEnv is the peer's environment as serve reads it.
type peerEnv struct {
	get      func(string) (string, bool)
	srv      func(name string) ([]*net.SRV, error) // DNS SRV look-up of MEMCACHE_SRV (net.LookupSRV)
	detected bool                                  // a variable only the peer's deployments set is present
	defaults map[string]string                     // flag name -> value from the peer's variables
	warnings [][2]string                           // variable, why it is not honoured
	flagErrs map[string]error                      // by flag: peer values that do not map (moot when the flag is set otherwise)
	errs     []error                               // settings that cannot be served at all
}

// peerMarkers are variables whose presence says the environment is the peer's: then serve
// listens where the peer does (0.0.0.0:8080 and :8081) and reads the peer's runtime
// directory by default.
var peerMarkers = []string{"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "REDIS_URL",
	"REDIS_SOCKET_TYPE", "REDIS_TYPE", "BACKEND_TYPE", "MEMCACHE_HOST_PORT", "USE_STATSD", "USE_PROMETHEUS",
	"GRPC_HOST", "GRPC_PORT", "CACHE_KEY_PREFIX", "LOCAL_CACHE_SIZE_IN_BYTES"}

// peerFlag maps some of the peer's variables to one serve flag; value returns the flag's
// value, or ok false to leave serve's default.
type peerFlag struct {
	flag  string
	vars  []string
	value func(e *peerEnv) (v string, ok bool, err error)
}

// peerFlags is the mapping, one row per serve flag.
var peerFlags = []peerFlag{
	// HOST and PORT are generic names a shell may export for anything: they count only in
	// the peer's environment (peerMarkers), and the listener they widen is named at start-up.
	{"http-addr", []string{"HOST", "PORT"}, func(e *peerEnv) (string, bool, error) {
		if !e.detected {
			return "", false, nil
		}
		return hostPort("HOST", "PORT", "8080")(e)
	}},
	{"grpc-addr", []string{"GRPC_HOST", "GRPC_PORT", "GRPC_UDS"}, func(e *peerEnv) (string, bool, error) {
		if uds := e.or("GRPC_UDS", ""); uds != "" {
			return "unix:" + uds, true, nil // the peer listens on the socket instead of GRPC_HOST:GRPC_PORT
		}
		return hostPort("GRPC_HOST", "GRPC_PORT", "8081")(e)
	}},
	{"debug-addr", []string{"DEBUG_HOST", "DEBUG_PORT"}, func(e *peerEnv) (string, bool, error) {
		if !e.has("DEBUG_HOST") && !e.has("DEBUG_PORT") {
			return "", false, nil // the peer's debug port is opened only when asked for
		}
		return net.JoinHostPort(e.or("DEBUG_HOST", "0.0.0.0"), e.or("DEBUG_PORT", "6070")), true, nil
	}},
	// RUNTIME_WATCH_ROOT chooses what the peer watches for changes; either way it reads
	// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, which serve polls.
	{"config", []string{"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "RUNTIME_WATCH_ROOT"}, func(e *peerEnv) (string, bool, error) {
		if !e.detected || strings.EqualFold(e.or("CONFIG_TYPE", ""), "GRPC_XDS_SOTW") { // xDS: source.go
			return "", false, nil
		}
		return runtimeDir(e), true, nil
	}},
	{"config-tree", []string{"RUNTIME_ROOT"}, func(e *peerEnv) (string, bool, error) { return "true", e.detected, nil }},
	{"config-dotfiles", []string{"RUNTIME_IGNOREDOTFILES"}, func(e *peerEnv) (string, bool, error) {
		ignore, err := e.boolean("RUNTIME_IGNOREDOTFILES")
		return strconv.FormatBool(!ignore), e.detected, err
	}},
	{"store", []string{"BACKEND_TYPE", "REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_URL", "REDIS_AUTH", "REDIS_TLS",
		"REDIS_POOL_SIZE", "REDIS_SENTINEL_AUTH", "MEMCACHE_HOST_PORT", "MEMCACHE_SRV"}, peerStore},
	{"store-srv-refresh", []string{"MEMCACHE_SRV_REFRESH"}, func(e *peerEnv) (string, bool, error) {
		if !strings.EqualFold(e.or("BACKEND_TYPE", ""), "memcache") || !e.has("MEMCACHE_SRV") || !e.has("MEMCACHE_SRV_REFRESH") {
			return "", false, nil // the peer refreshes only MEMCACHE_SRV's servers
		}
		v := e.or("MEMCACHE_SRV_REFRESH", "")
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return "", false, fmt.Errorf("MEMCACHE_SRV_REFRESH: want a duration like 30s, got %q", v)
		}
		return v, true, nil
	}},
	{"store-timeout", []string{"REDIS_TIMEOUT"}, func(e *peerEnv) (string, bool, error) {
		v, ok := e.get("REDIS_TIMEOUT")
		if !ok {
			return "", false, nil
		}
		if _, err := time.ParseDuration(v); err != nil {
			return "", false, fmt.Errorf("REDIS_TIMEOUT: want a duration like 10s, got %q", v)
		}
		return v, true, nil
	}},
	{"store-prefix", []string{"CACHE_KEY_PREFIX"}, verbatim("CACHE_KEY_PREFIX")},
	{"grpc-max-connection-age", []string{"GRPC_MAX_CONNECTION_AGE"}, duration("GRPC_MAX_CONNECTION_AGE", "24h")},
	{"grpc-max-connection-age-grace", []string{"GRPC_MAX_CONNECTION_AGE_GRACE"}, duration("GRPC_MAX_CONNECTION_AGE_GRACE", "1h")},
	{"mode", []string{"LOCAL_CACHE_SIZE_IN_BYTES"}, func(e *peerEnv) (string, bool, error) {
		v, ok := e.get("LOCAL_CACHE_SIZE_IN_BYTES")
		if !ok {
			return "", false, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return "", false, fmt.Errorf("LOCAL_CACHE_SIZE_IN_BYTES: want a number of bytes, got %q", v)
		}
		return "overlimit", n > 0, nil // the over-limit cache; its size is not bounded in bytes
	}},
	{"shadow-mode", []string{"SHADOW_MODE"}, boolean("SHADOW_MODE")},
	{"quota-mode", []string{"QUOTA_MODE"}, boolean("QUOTA_MODE")},
	{"response-headers", []string{"LIMIT_RESPONSE_HEADERS_ENABLED"}, boolean("LIMIT_RESPONSE_HEADERS_ENABLED")},
	{"response-header-names", []string{"LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"}, func(e *peerEnv) (string, bool, error) {
		if !e.has("LIMIT_LIMIT_HEADER") && !e.has("LIMIT_REMAINING_HEADER") && !e.has("LIMIT_RESET_HEADER") {
			return "", false, nil
		}
		return e.or("LIMIT_LIMIT_HEADER", "RateLimit-Limit") + "," + e.or("LIMIT_REMAINING_HEADER", "RateLimit-Remaining") +
			"," + e.or("LIMIT_RESET_HEADER", "RateLimit-Reset"), true, nil
	}},
	{"near-limit-ratio", []string{"NEAR_LIMIT_RATIO"}, verbatim("NEAR_LIMIT_RATIO")},
	{"log-level", []string{"LOG_LEVEL"}, func(e *peerEnv) (string, bool, error) {
		v, ok := e.get("LOG_LEVEL")
		if !ok || v == "" {
			return "", false, nil
		}
		switch l := strings.ToLower(v); l { // logrus's levels
		case "trace", "debug":
			return "debug", true, nil
		case "info":
			return "info", true, nil
		case "warn", "warning":
			return "warn", true, nil
		case "error", "fatal", "panic":
			return "error", true, nil
		}
		return "", false, fmt.Errorf("LOG_LEVEL: want trace, debug, info, warn, error, fatal or panic, got %q", v)
	}},
	{"log-format", []string{"LOG_FORMAT"}, func(e *peerEnv) (string, bool, error) {
		if !e.has("LOG_FORMAT") {
			return "", false, nil
		}
		if strings.EqualFold(e.or("LOG_FORMAT", ""), "json") { // the peer: json, anything else is text
			return "json", true, nil
		}
		return "text", true, nil
	}},
	{"metrics-addr", []string{"USE_PROMETHEUS", "PROMETHEUS_ADDR"}, func(e *peerEnv) (string, bool, error) {
		on, err := e.boolean("USE_PROMETHEUS")
		return e.or("PROMETHEUS_ADDR", ":9090"), on, err
	}},
	{"metrics-path", []string{"PROMETHEUS_PATH"}, verbatim("PROMETHEUS_PATH")},
	{"metrics-response-time-ms", []string{"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS"}, boolean("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS")},
	{"merge-domains", []string{"MERGE_DOMAIN_CONFIG"}, boolean("MERGE_DOMAIN_CONFIG")},
}

// peerUnhonoured are the peer's settings serve cannot honour. fatal ones stop serve: serving
// anyway would be wrong (no rules at all, or plain text where TLS was required).
var peerUnhonoured = []struct {
	env   string
	when  func(v string) bool
	why   string
	fatal bool
}{
	{"BACKEND_TYPE", func(v string) bool { return v != "" && v != "redis" && v != "memcache" }, "unknown backend; the memory store serves", false},
	{"USE_DOG_STATSD", isTrue, "dogstatsd is not supported: the peer's series are on /metrics (Prometheus)", false},
}

// peerNoEffect are the peer's settings that tune its own internals and change no answer: they
// are read and said to have no effect, at level info.
var peerNoEffect = []struct{ env, why string }{
	{"REDIS_PIPELINE_WINDOW", "the Redis store pipelines concurrent decisions on its own"},
	{"REDIS_PIPELINE_LIMIT", "the Redis store pipelines concurrent decisions on its own"},
	{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "by default Sluice does not count denied hits (a request over one limit consumes nothing); --count-denied counts them as the peer does without this setting"},
	{"EXPIRATION_JITTER_MAX_SECONDS", "every key expires when its state is back to full"},
	{"REDIS_CLUSTER_PIPELINE_PARALLELISM", "the Redis store pipelines concurrent decisions on its own"},
	{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "the Redis client waits for a connection, bounded by --store-timeout"},
	{"REDIS_STARTUP_INITIAL_INTERVAL", "serve starts without waiting for Redis; /readyz says when it answers"},
	{"REDIS_STARTUP_MAX_INTERVAL", "serve starts without waiting for Redis; /readyz says when it answers"},
	{"REDIS_STARTUP_MAX_ELAPSED_TIME", "serve starts without waiting for Redis; /readyz says when it answers"},
	{"MEMCACHE_MAX_IDLE_CONNS", "the memcached client keeps its own pool"},
}

// peerSubordinate are the peer's variables that only tune a feature another variable turns
// on (the second name), which is mapped, warned about or refused itself.
var peerSubordinate = map[string]string{
	"USE_DOG_STATSD_MOGRIFIERS":       "USE_DOG_STATSD",
	"REDIS_PERSECOND_PIPELINE_WINDOW": "REDIS_PERSECOND", "REDIS_PERSECOND_PIPELINE_LIMIT": "REDIS_PERSECOND",
	"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM": "REDIS_PERSECOND", "REDIS_PERSECOND_TIMEOUT": "REDIS_PERSECOND",
	"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR": "REDIS_PERSECOND",
}

func isTrue(v string) bool { b, _ := strconv.ParseBool(v); return b }

// readPeerEnv reads the peer's environment through get (os.LookupEnv).
func readPeerEnv(get func(string) (string, bool)) *peerEnv {
	return readPeerEnvSRV(get, func(name string) ([]*net.SRV, error) {
		_, addrs, err := net.LookupSRV("", "", name)
		return addrs, err
	})
}

// readPeerEnvSRV is readPeerEnv with the DNS SRV look-up of MEMCACHE_SRV.
func readPeerEnvSRV(get func(string) (string, bool), srv func(string) ([]*net.SRV, error)) *peerEnv {
	e := &peerEnv{get: get, srv: srv, defaults: make(map[string]string), flagErrs: make(map[string]error)}
	for _, v := range peerMarkers {
		e.detected = e.detected || e.has(v)
	}
	for _, row := range peerFlags {
		v, ok, err := row.value(e)
		if err != nil {
			e.flagErrs[row.flag] = err
			continue
		}
		if ok {
			e.defaults[row.flag] = v
		}
	}
	for _, u := range peerUnhonoured {
		if v, ok := get(u.env); ok && u.when(v) {
			if u.fatal {
				e.errs = append(e.errs, fmt.Errorf("%s=%s: %s", u.env, v, u.why))
				continue
			}
			e.warnings = append(e.warnings, [2]string{u.env, u.why})
		}
	}
	return e
}

func (e *peerEnv) has(name string) bool {
	v, ok := e.get(name)
	return ok && v != ""
}

func (e *peerEnv) or(name, def string) string {
	if v, ok := e.get(name); ok && v != "" {
		return v
	}
	return def
}

func (e *peerEnv) boolean(name string) (bool, error) {
	v, ok := e.get(name)
	if !ok || v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: want true or false, got %q", name, v)
	}
	return b, nil
}

// duration maps a duration variable, with the peer's default def once its environment is
// detected.
func duration(name, def string) func(e *peerEnv) (string, bool, error) {
	return func(e *peerEnv) (string, bool, error) {
		if !e.has(name) {
			return def, e.detected, nil
		}
		v := e.or(name, def)
		if _, err := time.ParseDuration(v); err != nil {
			return "", false, fmt.Errorf("%s: want a duration like 24h, got %q", name, v)
		}
		return v, true, nil
	}
}

func verbatim(name string) func(e *peerEnv) (string, bool, error) {
	return func(e *peerEnv) (string, bool, error) {
		v, ok := e.get(name)
		return v, ok && v != "", nil
	}
}

func boolean(name string) func(e *peerEnv) (string, bool, error) {
	return func(e *peerEnv) (string, bool, error) {
		b, err := e.boolean(name)
		return strconv.FormatBool(b), e.has(name), err
	}
}

// hostPort maps a host and a port variable to an address: set when either is, or when the
// environment is the peer's (its defaults, 0.0.0.0 and defPort, then apply).
func hostPort(hostVar, portVar, defPort string) func(e *peerEnv) (string, bool, error) {
	return func(e *peerEnv) (string, bool, error) {
		if !e.detected && !e.has(hostVar) && !e.has(portVar) {
			return "", false, nil
		}
		port := e.or(portVar, defPort)
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return "", false, fmt.Errorf("%s: want a port number, got %q", portVar, port)
		}
		return net.JoinHostPort(e.or(hostVar, "0.0.0.0"), port), true, nil
	}
}

// runtimeDir is the directory the peer reads its rules from:
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, with the peer's defaults.
func runtimeDir(e *peerEnv) string {
	return filepath.Join(e.or("RUNTIME_ROOT", "/srv/runtime_data/current"), e.or("RUNTIME_SUBDIRECTORY", ""),
		e.or("RUNTIME_APPDIRECTORY", "config"))
}

// peerStore maps BACKEND_TYPE and the REDIS_* or MEMCACHE_* variables to a store URL.
func peerStore(e *peerEnv) (string, bool, error) {
	switch strings.ToLower(e.or("BACKEND_TYPE", "redis")) {
	case "memcache":
		return peerMemcache(e)
	case "redis":
	default:
		return "", false, nil // warned in peerUnhonoured
	}
	return peerRedis(e, "REDIS_")
}

// peerRedis maps the Redis variables whose names start with p (REDIS_, or REDIS_PERSECOND_
// for the per-second Redis) to a store URL.
func peerRedis(e *peerEnv, p string) (string, bool, error) {
	addr, ok := e.get(p + "URL")
	if !ok || addr == "" {
		return "", false, nil
	}
	if strings.EqualFold(e.or(p+"SOCKET_TYPE", "unix"), "unix") {
		return "", false, fmt.Errorf("%sSOCKET_TYPE=unix (the peer's default): Redis over a Unix socket is not supported; set %sSOCKET_TYPE=tcp and %sURL=host:port", p, p, p)
	}
	if strings.Contains(addr, "://") {
		return addr, true, nil // already a URL
	}
	q := url.Values{}
	if n := e.or(p+"POOL_SIZE", ""); n != "" {
		q.Set("pool_size", n)
	}
	user, pass, _ := strings.Cut(e.or(p+"AUTH", ""), ":")
	if pass == "" { // REDIS_AUTH is "password" or "user:password"
		user, pass = "", user
	}
	var u url.URL
	switch strings.ToLower(e.or(p+"TYPE", "single")) {
	case "single":
		u = url.URL{Scheme: "redis", Host: addr}
		if tls, err := e.boolean(p + "TLS"); err != nil {
			return "", false, err
		} else if tls {
			u.Scheme = "rediss"
		}
		u.User = userinfo(user, pass)
	case "cluster":
		u = url.URL{Scheme: "redis-cluster", Host: addr, User: userinfo(user, pass)}
	case "sentinel": // REDIS_URL is "master,host:port,host:port"
		master, sentinels, found := strings.Cut(addr, ",")
		if !found {
			return "", false, fmt.Errorf("%sURL: %sTYPE=sentinel wants master,host:port[,host:port...], got %q", p, p, addr)
		}
		u = url.URL{Scheme: "redis-sentinel", Host: sentinels, Path: "/" + master}
		if sp := e.or(p+"SENTINEL_AUTH", ""); sp != "" {
			u.User = url.UserPassword("", sp)
		}
		if user != "" {
			q.Set("username", user)
		}
		if pass != "" {
			q.Set("password", pass)
		}
	default:
		return "", false, fmt.Errorf("%sTYPE: want single, sentinel or cluster, got %q", p, e.or(p+"TYPE", ""))
	}
	u.RawQuery = q.Encode()
	return u.String(), true, nil
}

func userinfo(user, pass string) *url.Userinfo {
	if pass == "" {
		return nil
	}
	return url.UserPassword(user, pass)
}

// env is the default of a flag: its SLUICE_* variable (name) when set, else what the peer's
// variables say, else def.
func (f *serveFlags) env(flagName, name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	if v, ok := f.peer.defaults[flagName]; ok {
		return v
	}
	return def
}

// registerPeer registers the flags that carry envoyproxy/ratelimit's settings over.
func (f *serveFlags) registerPeer(fs *flag.FlagSet) {
	fs.StringVar(&f.storePrefix, "store-prefix", f.env("store-prefix", "SLUICE_STORE_PREFIX", ""), "prefix of every key in a shared store (default sluice:) [SLUICE_STORE_PREFIX, CACHE_KEY_PREFIX]")
	fs.StringVar(&f.defaultAlgorithm, "default-algorithm", f.env("default-algorithm", "SLUICE_DEFAULT_ALGORITHM", "sliding_window"), "algorithm of the rules that name none and of limit overrides; fixed_window gives envoyproxy/ratelimit's clock-aligned windows [SLUICE_DEFAULT_ALGORITHM]")
	fs.BoolVar(&f.mergeDomains, "merge-domains", f.envBool("merge-domains", "SLUICE_MERGE_DOMAINS"), "let several rules files define one domain, merged [SLUICE_MERGE_DOMAINS, MERGE_DOMAIN_CONFIG]")
	fs.BoolVar(&f.configTree, "config-tree", f.envBool("config-tree", "SLUICE_CONFIG_TREE"), "read every file below the --config directory, recursively, as envoyproxy/ratelimit reads its runtime directory [SLUICE_CONFIG_TREE, RUNTIME_*]")
	fs.BoolVar(&f.configDotFiles, "config-dotfiles", f.envBool("config-dotfiles", "SLUICE_CONFIG_DOTFILES"), "with --config-tree, read names starting with '.' too [SLUICE_CONFIG_DOTFILES, RUNTIME_IGNOREDOTFILES]")
	fs.BoolVar(&f.shadowMode, "shadow-mode", f.envBool("shadow-mode", "SLUICE_SHADOW_MODE"), "answer OK to every request over its limit, counting it [SLUICE_SHADOW_MODE, SHADOW_MODE]")
	fs.BoolVar(&f.countDenied, "count-denied", f.envBool("count-denied", "SLUICE_COUNT_DENIED"), "count the hits of requests over a limit and decide each descriptor on its own, as envoyproxy/ratelimit does (#427); default: a request over one limit consumes nothing [SLUICE_COUNT_DENIED]")
	fs.BoolVar(&f.quotaMode, "quota-mode", f.envBool("quota-mode", "SLUICE_QUOTA_MODE"), "every limit in quota mode: a request is over only when all its limits are [SLUICE_QUOTA_MODE, QUOTA_MODE]")
	fs.StringVar(&f.headerNames, "response-header-names", f.env("response-header-names", "SLUICE_RESPONSE_HEADER_NAMES", "RateLimit-Limit,RateLimit-Remaining,RateLimit-Reset"), "names of the --response-headers: limit,remaining,reset [SLUICE_RESPONSE_HEADER_NAMES, LIMIT_*_HEADER]")
	fs.StringVar(&f.nearLimitRatio, "near-limit-ratio", f.env("near-limit-ratio", "SLUICE_NEAR_LIMIT_RATIO", "0.8"), "share of a limit past which hits count as near_limit in the ratelimit_service_* metrics [SLUICE_NEAR_LIMIT_RATIO, NEAR_LIMIT_RATIO]")
	fs.StringVar(&f.metricsAddr, "metrics-addr", f.env("metrics-addr", "SLUICE_METRICS_ADDR", ""), "also serve the metrics on this address (they are always on --http-addr) [SLUICE_METRICS_ADDR, USE_PROMETHEUS+PROMETHEUS_ADDR]")
	fs.StringVar(&f.metricsPath, "metrics-path", f.env("metrics-path", "SLUICE_METRICS_PATH", "/metrics"), "path of the metrics on --metrics-addr [SLUICE_METRICS_PATH, PROMETHEUS_PATH]")
	fs.DurationVar(&f.grpcMaxAge, "grpc-max-connection-age", f.envDuration("grpc-max-connection-age", "SLUICE_GRPC_MAX_CONNECTION_AGE", f.peerDuration("grpc-max-connection-age")), "close each gRPC connection after about this long so clients spread over the instances; 0: never [SLUICE_GRPC_MAX_CONNECTION_AGE, GRPC_MAX_CONNECTION_AGE]")
	fs.DurationVar(&f.grpcMaxAgeGrace, "grpc-max-connection-age-grace", f.envDuration("grpc-max-connection-age-grace", "SLUICE_GRPC_MAX_CONNECTION_AGE_GRACE", f.peerDuration("grpc-max-connection-age-grace")), "how long the calls of a connection closed by age may still take; 0: no bound [SLUICE_GRPC_MAX_CONNECTION_AGE_GRACE, GRPC_MAX_CONNECTION_AGE_GRACE]")
	f.registerStats(fs)
	fs.StringVar(&f.debugAddr, "debug-addr", f.env("debug-addr", "SLUICE_DEBUG_ADDR", ""), "serve envoyproxy/ratelimit's debug endpoint /rlconfig on this address too [SLUICE_DEBUG_ADDR, DEBUG_HOST+DEBUG_PORT]")
}

// peerDuration is the default a duration flag takes from the peer's variables, 0 without.
func (f *serveFlags) peerDuration(flagName string) time.Duration {
	d, _ := time.ParseDuration(f.peer.defaults[flagName]) // checked by readPeerEnv
	return d
}

// envBool is env for a boolean flag; a value that does not parse is kept in f.envErrs.
func (f *serveFlags) envBool(flagName, name string) bool {
	v := f.env(flagName, name, "false")
	b, err := strconv.ParseBool(v)
	if err != nil {
		f.envErr(flagName, fmt.Sprintf("--%s: %s: want true or false, got %q", flagName, name, v))
	}
	return b
}

// peerConfig is what the flags of registerPeer set in server.Config, checked.
type peerConfig struct {
	rules                               config.Options
	shadow, quota, countDenied          bool
	ratio                               float64
	names                               [3]string
	metricsAddr, metricsPath, debugAddr string
	maxAge, maxAgeGrace                 time.Duration
}

func (p peerConfig) apply(c *server.Config) {
	c.RulesOptions = p.rules
	c.GlobalShadowMode, c.GlobalQuotaMode, c.CountDenied = p.shadow, p.quota, p.countDenied
	c.NearLimitRatio, c.ResponseHeaderNames = p.ratio, p.names
	c.MetricsAddr, c.MetricsPath, c.DebugAddr = p.metricsAddr, p.metricsPath, p.debugAddr
	c.GRPCMaxConnectionAge, c.GRPCMaxConnectionAgeGrace = p.maxAge, p.maxAgeGrace
}

// checkPeer checks the flags of registerPeer and the peer's settings, naming the flag or
// the variable. A peer value that does not map is an error only when its flag was set by
// neither the command line nor its SLUICE_* variable.
func (f *serveFlags) checkPeer(fs *flag.FlagSet) (peerConfig, error) {
	var p peerConfig
	if len(f.peer.errs) > 0 {
		return p, errors.Join(f.peer.errs...)
	}
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true; delete(f.envErrs, fl.Name) })
	for _, row := range peerFlags {
		if err := f.peer.flagErrs[row.flag]; err != nil && !given[row.flag] {
			return p, fmt.Errorf("--%s: from envoyproxy/ratelimit's %w", row.flag, err)
		}
	}
	for _, name := range []string{"merge-domains", "config-tree", "config-dotfiles", "shadow-mode", "quota-mode", "count-denied",
		"grpc-max-connection-age", "grpc-max-connection-age-grace"} {
		if msg, ok := f.envErrs[name]; ok {
			return p, errors.New(msg)
		}
	}
	algo, err := sluice.ParseAlgorithm(f.defaultAlgorithm)
	if err != nil {
		return p, fmt.Errorf("--default-algorithm: %w", err)
	}
	p.rules = config.Options{DefaultAlgorithm: algo, MergeDomains: f.mergeDomains, Tree: f.configTree, DotFiles: f.configDotFiles}
	if p.ratio, err = strconv.ParseFloat(f.nearLimitRatio, 64); err != nil || p.ratio <= 0 || p.ratio > 1 {
		return p, fmt.Errorf("--near-limit-ratio: want a number in (0, 1], got %q%s", f.nearLimitRatio, f.fromPeer(given, "near-limit-ratio", f.nearLimitRatio))
	}
	names := strings.Split(f.headerNames, ",")
	if len(names) != 3 || names[0] == "" || names[1] == "" || names[2] == "" {
		return p, fmt.Errorf("--response-header-names: want three names, limit,remaining,reset, got %q%s", f.headerNames, f.fromPeer(given, "response-header-names", f.headerNames))
	}
	copy(p.names[:], names)
	p.shadow, p.quota, p.countDenied = f.shadowMode, f.quotaMode, f.countDenied
	p.metricsAddr, p.metricsPath, p.debugAddr = f.metricsAddr, f.metricsPath, f.debugAddr
	if f.grpcMaxAge < 0 || f.grpcMaxAgeGrace < 0 {
		return p, fmt.Errorf("--grpc-max-connection-age, --grpc-max-connection-age-grace: must not be negative")
	}
	p.maxAge, p.maxAgeGrace = f.grpcMaxAge, f.grpcMaxAgeGrace
	if !strings.HasPrefix(p.metricsPath, "/") {
		return p, fmt.Errorf("--metrics-path: want a path starting with /, got %q%s", p.metricsPath, f.fromPeer(given, "metrics-path", p.metricsPath))
	}
	return p, nil
}

// fromPeer names the peer's variables a flag's value came from, for an error message: ""
// when the flag was given, or its value is not the one the peer's variables say.
func (f *serveFlags) fromPeer(given map[string]bool, flagName, value string) string {
	if v, ok := f.peer.defaults[flagName]; !ok || v != value || given[flagName] {
		return ""
	}
	for _, row := range peerFlags {
		if row.flag == flagName {
			return " (from envoyproxy/ratelimit's " + strings.Join(row.vars, ", ") + ")"
		}
	}
	return ""
}

// logPeer says, once at start-up, which of envoyproxy/ratelimit's settings are in force and
// which cannot be honoured (a warning naming each) or have no effect here.
func (f *serveFlags) logPeer(log *slog.Logger) {
	f.logEnv(log)
	if f.peer.detected {
		log.Info("envoyproxy/ratelimit environment: its settings apply where no flag or SLUICE_* variable is set",
			"grpc", f.grpcAddr, "http", f.httpAddr, "rules", f.config)
	}
	for _, w := range f.peer.warnings {
		log.Warn("envoyproxy/ratelimit setting not honoured", "setting", w[0], "why", w[1])
	}
	for _, n := range peerNoEffect {
		if _, ok := f.peer.get(n.env); ok {
			log.Info("envoyproxy/ratelimit setting has no effect", "setting", n.env, "why", n.why)
		}
	}
}
