package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/examples"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

func init() {
	register(command{name: "serve", summary: "run the rate-limit service (Envoy RLS gRPC + HTTP JSON API)", run: runServe})
}

// serveFlags are the flags of serve, each defaulting to its SLUICE_* environment variable.
type serveFlags struct {
	sharedFlags
	grpcAddr, httpAddr, pprofAddr            string
	headers                                  string
	requestRules                             string
	maxRequestLogLimit, maxRequestStateBytes int64
	maxRequestPeriod                         time.Duration
	memoryMaxBytes                           int64
	readHeaderTimeout, idleTimeout           time.Duration
	maxHeaderBytes, maxConns                 int64
	envErrs                                  map[string]string // by flag: environment values that did not parse

	// envoyproxy/ratelimit's settings (peerenv.go)
	peer                                                            *peerEnv
	storePrefix, defaultAlgorithm, headerNames, nearLimitRatio      string
	metricsAddr, metricsPath, debugAddr                             string
	mergeDomains, configTree, configDotFiles, shadowMode, quotaMode bool
	countDenied                                                     bool
	grpcMaxAge, grpcMaxAgeGrace                                     time.Duration

	quotaStore string         // the RLQS quota state (quota.go)
	stats      peerExtraFlags // the peer's statsd stats (peerstats.go)

	source  sourceFlags  // rules from xDS, TLS on the gRPC port (source.go)
	tracing tracingFlags // tracing.go

	// the gateways' doors: forward-auth, ext_authz
	trustedProxies, gatewayHeaders string
	gatewayInFlight                bool
	gatewayStyle                   httplimit.HeaderStyle // of gatewayHeaders, once checked
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	f.sharedFlags.register(fs, "rules file or directory, watched for changes (default: the embedded example rules)", f.env)
	fs.StringVar(&f.grpcAddr, "grpc-addr", f.env("grpc-addr", "SLUICE_GRPC_ADDR", server.DefaultGRPCAddr), "Envoy RLS gRPC listen address, - to disable [SLUICE_GRPC_ADDR, GRPC_HOST+GRPC_PORT]")
	fs.StringVar(&f.httpAddr, "http-addr", f.env("http-addr", "SLUICE_HTTP_ADDR", server.DefaultHTTPAddr), "HTTP API, /metrics and health listen address, - to disable [SLUICE_HTTP_ADDR, HOST+PORT]")
	fs.StringVar(&f.quotaStore, "quota-store", f.env("quota-store", "SLUICE_QUOTA_STORE", "memory"), "where the RLQS quota server keeps demands and assignments: memory (this replica alone) or a redis URL shared by every replica [SLUICE_QUOTA_STORE]")
	fs.StringVar(&f.pprofAddr, "pprof", f.env("pprof", "SLUICE_PPROF_ADDR", ""), "debug listener with /debug/pprof/ (e.g. 127.0.0.1:6060; loopback only); empty: off [SLUICE_PPROF_ADDR]")
	fs.StringVar(&f.requestRules, "request-rules", f.env("request-rules", "SLUICE_REQUEST_RULES", server.RequestRulesAny), "rules a request may choose (/v1/allow's rule, descriptors' limit override): any (within the --max-request-* ceilings), named (only limits of the config, by name), off [SLUICE_REQUEST_RULES]")
	fs.Int64Var(&f.maxRequestLogLimit, "max-request-log-limit", f.envInt64("max-request-log-limit", "SLUICE_MAX_REQUEST_LOG_LIMIT", server.DefaultMaxRequestLogLimit), "largest limit of a sliding_log rule supplied by a request [SLUICE_MAX_REQUEST_LOG_LIMIT]")
	fs.DurationVar(&f.maxRequestPeriod, "max-request-period", f.envDuration("max-request-period", "SLUICE_MAX_REQUEST_PERIOD", server.DefaultMaxRequestPeriod), "longest period of a rule supplied by a request [SLUICE_MAX_REQUEST_PERIOD]")
	f.registerPeer(fs)
	f.registerSource(fs)
	f.registerHeaders(fs)
	f.tracing.register(fs, f.env)
	fs.Int64Var(&f.maxRequestStateBytes, "max-request-state-bytes", f.envInt64("max-request-state-bytes", "SLUICE_MAX_REQUEST_STATE_BYTES", server.DefaultMaxRequestState), "largest state per key (bytes) of a rule supplied by a request, as Redis holds it: 128 per entry of a sliding log, 2 x limit entries in debt [SLUICE_MAX_REQUEST_STATE_BYTES]")
	fs.Int64Var(&f.memoryMaxBytes, "memory-max-bytes", f.envInt64("memory-max-bytes", "SLUICE_MEMORY_MAX_BYTES", memory.DefaultMaxBytes), "most bytes the memory store's keys hold (each charged its entry and the most state its rule can hold); a new key past it evicts the keys that cost least to forget, never one over its limit, or is refused [SLUICE_MEMORY_MAX_BYTES]")
	fs.DurationVar(&f.readHeaderTimeout, "http-read-header-timeout", f.envDuration("http-read-header-timeout", "SLUICE_HTTP_READ_HEADER_TIMEOUT", server.DefaultReadHeaderTimeout), "longest time an HTTP client may take to send its request headers (slowloris) [SLUICE_HTTP_READ_HEADER_TIMEOUT]")
	fs.DurationVar(&f.idleTimeout, "http-idle-timeout", f.envDuration("http-idle-timeout", "SLUICE_HTTP_IDLE_TIMEOUT", server.DefaultIdleTimeout), "longest wait of a keep-alive HTTP connection for its next request [SLUICE_HTTP_IDLE_TIMEOUT]")
	fs.Int64Var(&f.maxHeaderBytes, "http-max-header-bytes", f.envInt64("http-max-header-bytes", "SLUICE_HTTP_MAX_HEADER_BYTES", server.DefaultMaxHeaderBytes), "largest request headers (bytes) on the HTTP port [SLUICE_HTTP_MAX_HEADER_BYTES]")
	fs.StringVar(&f.trustedProxies, "trusted-proxies", f.env("trusted-proxies", "SLUICE_TRUSTED_PROXIES", ""), "comma-separated CIDRs or addresses of the gateways (and the proxies before them) whose X-Forwarded-For and ext_authz source address are believed by /v1/forward-auth and ext_authz; empty: the client is the peer that asks [SLUICE_TRUSTED_PROXIES]")
	fs.StringVar(&f.gatewayHeaders, "gateway-headers", f.env("gateway-headers", "SLUICE_GATEWAY_HEADERS", httplimit.HeadersBoth.String()), "rate-limit headers of forward-auth and ext_authz answers: both (RateLimit-Policy and RateLimit, and X-RateLimit-*), ietf, x or none [SLUICE_GATEWAY_HEADERS]")
	inFlight, _ := strconv.ParseBool(f.env("gateway-in-flight", "SLUICE_GATEWAY_IN_FLIGHT", "false"))
	fs.BoolVar(&f.gatewayInFlight, "gateway-in-flight", inFlight, "enforce the rules' max_in_flight in forward-auth and ext_authz answers, each slot held until the gateway releases it (POST /v1/leases/release) or its lease ends; RLS and /v1/allow calls take no slot [SLUICE_GATEWAY_IN_FLIGHT]")
	fs.Int64Var(&f.maxConns, "http-max-conns", f.envInt64("http-max-conns", "SLUICE_HTTP_MAX_CONNS", server.DefaultMaxConns), "most open HTTP connections; one beyond it is closed at once; -1: no bound [SLUICE_HTTP_MAX_CONNS]")
}

// checkHTTPLimits reports the first problem of the HTTP connection settings, naming the flag.
func (f *serveFlags) checkHTTPLimits() error {
	for _, name := range []string{"http-read-header-timeout", "http-idle-timeout", "http-max-header-bytes", "http-max-conns"} {
		if msg, ok := f.envErrs[name]; ok {
			return errors.New(msg)
		}
	}
	style, err := httplimit.ParseHeaderStyle(f.gatewayHeaders)
	if err != nil || style == httplimit.HeadersOnDenial {
		return fmt.Errorf("--gateway-headers: want both, ietf, x or none, got %q", f.gatewayHeaders)
	}
	f.gatewayStyle = style
	if _, err := clientip.New(list(f.trustedProxies)); err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	switch {
	case f.readHeaderTimeout <= 0:
		return fmt.Errorf("--http-read-header-timeout: must be positive, got %v", f.readHeaderTimeout)
	case f.idleTimeout <= 0:
		return fmt.Errorf("--http-idle-timeout: must be positive, got %v", f.idleTimeout)
	case f.maxHeaderBytes < 1<<10 || f.maxHeaderBytes > 1<<30:
		return fmt.Errorf("--http-max-header-bytes: must be between 1024 and %d, got %d", 1<<30, f.maxHeaderBytes)
	case f.maxConns == 0 || f.maxConns < -1 || f.maxConns > 1<<30:
		return fmt.Errorf("--http-max-conns: must be -1 (no bound) or between 1 and %d, got %d", 1<<30, f.maxConns)
	}
	return nil
}

// envInt64 is the integer in the environment variable name (of flag flagName), or def when it is unset;
// a value that does not parse is kept in f.envErrs.
func (f *serveFlags) envInt64(flagName, name string, def int64) int64 {
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		f.envErr(flagName, fmt.Sprintf("--%s: %s: want an integer, got %q", flagName, name, v))
		return def
	}
	return n
}

// envDuration is envInt64 for a duration.
func (f *serveFlags) envDuration(flagName, name string, def time.Duration) time.Duration {
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		f.envErr(flagName, fmt.Sprintf("--%s: %s: want a duration like 1h, got %q", flagName, name, v))
		return def
	}
	return d
}

func (f *serveFlags) envErr(flagName, msg string) {
	if f.envErrs == nil {
		f.envErrs = make(map[string]string)
	}
	f.envErrs[flagName] = msg
}

// serveStoreConfig is the store of serve: the shared flags' and the memory store's byte
// budget.
func (f *serveFlags) serveStoreConfig() store.Config {
	c := f.storeConfig(f.storePrefix)
	c.MemoryMaxBytes = f.memoryMaxBytes
	c.PerSecondURL = f.stats.perSecondStore
	return c
}

// checkRequestRules reports the first problem of the request-rule settings, naming the flag;
// an environment value that did not parse is one unless the flag was given.
func (f *serveFlags) checkRequestRules(fs *flag.FlagSet) error {
	fs.Visit(func(fl *flag.Flag) { delete(f.envErrs, fl.Name) })
	for _, name := range []string{"max-request-log-limit", "max-request-period", "max-request-state-bytes", "memory-max-bytes"} {
		if msg, ok := f.envErrs[name]; ok {
			return errors.New(msg)
		}
	}
	switch f.requestRules {
	case server.RequestRulesAny, server.RequestRulesNamed, server.RequestRulesOff:
	default:
		return fmt.Errorf("--request-rules: want %s, %s or %s, got %q", server.RequestRulesAny, server.RequestRulesNamed, server.RequestRulesOff, f.requestRules)
	}
	if f.maxRequestLogLimit < 1 || f.maxRequestLogLimit > sluice.MaxSlidingLogLimit {
		return fmt.Errorf("--max-request-log-limit: must be between 1 and %d, got %d", sluice.MaxSlidingLogLimit, f.maxRequestLogLimit)
	}
	if f.maxRequestPeriod < sluice.MinPeriod || f.maxRequestPeriod > sluice.MaxPeriod {
		return fmt.Errorf("--max-request-period: must be between %v and %v, got %v", sluice.MinPeriod, sluice.MaxPeriod, f.maxRequestPeriod)
	}
	if f.memoryMaxBytes < 1 {
		return fmt.Errorf("--memory-max-bytes: must be positive, got %d", f.memoryMaxBytes)
	}
	if f.maxRequestStateBytes < 1 {
		return fmt.Errorf("--max-request-state-bytes: must be positive, got %d", f.maxRequestStateBytes)
	}
	return nil
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs, f := serveFlagSet(stderr, os.LookupEnv)
	if code, done := parseFlags("serve", fs, &serveHelp, args, stdout, stderr); done {
		return code
	}
	if err := f.check(); err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	if err := f.checkRequestRules(fs); err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	if err := f.checkHTTPLimits(); err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	headers, err := f.responseHeaders()
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	peerCfg, err := f.checkPeer(fs)
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	logger, err := f.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	f.logPeer(logger)
	if len(ignoredArgs) > 0 {
		logger.Warn("arguments ignored, as envoyproxy/ratelimit ignores every argument (sluice runs as /bin/ratelimit); only serve's flags are read", "ignored", ignoredArgs)
	}
	cfg := server.Config{
		Config: rls.Config{
			RulesPath:      f.config,
			ReloadInterval: f.reload,
			StoreConfig:    f.serveStoreConfig(),
			Logger:         logger,

			RequestRules:         f.requestRules,
			MaxRequestLogLimit:   f.maxRequestLogLimit,
			MaxRequestPeriod:     f.maxRequestPeriod,
			MaxRequestStateBytes: f.maxRequestStateBytes,
			InFlight:             f.gatewayInFlight,
		},
		TrustedProxies:  list(f.trustedProxies),
		GatewayHeaders:  f.gatewayStyle,
		GRPCAddr:        f.grpcAddr,
		HTTPAddr:        f.httpAddr,
		ResponseHeaders: headers,

		ReadHeaderTimeout: f.readHeaderTimeout,
		IdleTimeout:       f.idleTimeout,
		MaxHeaderBytes:    int(f.maxHeaderBytes),
		MaxConns:          int(f.maxConns),
	}
	peerCfg.apply(&cfg)
	closeStats, err := f.startStats(fs, &cfg, logger)
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	defer closeStats()
	if err := f.applySource(fs, &cfg, logger); err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	if f.config == "" && cfg.RulesSource == nil {
		rules, err := config.LoadFS(examples.Config, examples.ConfigDir)
		if err != nil {
			fmt.Fprintln(stderr, "sluice serve: embedded example rules:", err)
			return 1
		}
		cfg.Rules = rules
		logger.Info("no --config given: serving the embedded example rules (examples/config/rules.yaml)")
	}
	if f.pprofAddr != "" {
		stopPprof, err := servePprof(f.pprofAddr)
		if err != nil {
			fmt.Fprintln(stderr, "sluice serve:", err)
			return 2
		}
		defer stopPprof()
		logger.Info("pprof debug listener", "addr", f.pprofAddr)
	}
	stopTracing, err := f.tracing.start(&cfg)
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	defer stopTracing()
	global, closeRegions, err := f.regions.open(f.storePrefix, f.storeTLS.tls, logger)
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	defer closeRegions()
	cfg.GlobalStore = global
	closeQuota, err := quotaState(&cfg, f.quotaStore, f.storeTLS.tls)
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve: --quota-store:", err)
		return 2
	}
	defer closeQuota()
	if err := f.setSRVRefresh(&cfg, logger); err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	logStore(logger, cfg.StoreConfig)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := server.Run(ctx, cfg); err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 1
	}
	return 0
}

// servePprof serves /debug/pprof/ on addr, which must be a loopback address: profiles
// reveal internals and cost CPU, so they are never exposed beyond the host.
func servePprof(addr string) (stop func(), err error) {
	loopback, err := isLoopback(addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof: %w", err)
	}
	if !loopback {
		return nil, fmt.Errorf("--pprof: %q is not a loopback address (want e.g. 127.0.0.1:6060)", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }() // returns when closed
	return func() { _ = srv.Close() }, nil
}
