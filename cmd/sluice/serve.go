package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/examples"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/redis"
	"github.com/sluicehq/sluice/stores"
)

func init() {
	register(command{name: "serve", summary: "run the rate-limit service (Envoy RLS gRPC + HTTP JSON API)", run: runServe})
}

// serveFlags are the flags of serve, each defaulting to its SLUICE_* environment variable.
type serveFlags struct {
	config, grpcAddr, httpAddr, store, mode, fallback string
	logLevel, logFormat, pprofAddr                    string
	reload, storeTimeout                              time.Duration
	headers                                           bool
	requestRules                                      string
	maxRequestLogLimit, maxRequestStateBytes          int64
	maxRequestPeriod                                  time.Duration
	readHeaderTimeout, idleTimeout                    time.Duration
	maxHeaderBytes, maxConns                          int64
	envErrs                                           map[string]string // by flag: environment values that did not parse
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", serveEnv("SLUICE_CONFIG", ""), "rules file or directory, watched for changes (default: the embedded example rules) [SLUICE_CONFIG]")
	fs.StringVar(&f.grpcAddr, "grpc-addr", serveEnv("SLUICE_GRPC_ADDR", server.DefaultGRPCAddr), "Envoy RLS gRPC listen address, - to disable [SLUICE_GRPC_ADDR]")
	fs.StringVar(&f.httpAddr, "http-addr", serveEnv("SLUICE_HTTP_ADDR", server.DefaultHTTPAddr), "HTTP API, /metrics and health listen address, - to disable [SLUICE_HTTP_ADDR]")
	fs.StringVar(&f.store, "store", serveEnv("SLUICE_STORE", "memory"), "store URL: memory, redis://host:port/db, rediss://..., redis-cluster://host:port,host:port, redis-sentinel://host:port,host:port/MASTER [SLUICE_STORE]")
	fs.StringVar(&f.mode, "mode", serveEnv("SLUICE_MODE", "sync"), "distribution mode: sync, overlimit or async [SLUICE_MODE]")
	fs.StringVar(&f.fallback, "fallback", serveEnv("SLUICE_FALLBACK", ""), "policy while the store is down: local, fail_open, fail_closed; empty: answer UNAVAILABLE [SLUICE_FALLBACK]")
	fs.StringVar(&f.logLevel, "log-level", serveEnv("SLUICE_LOG_LEVEL", "info"), "log level: debug, info, warn, error [SLUICE_LOG_LEVEL]")
	fs.StringVar(&f.logFormat, "log-format", serveEnv("SLUICE_LOG_FORMAT", "text"), "log format: text or json [SLUICE_LOG_FORMAT]")
	reload, _ := time.ParseDuration(serveEnv("SLUICE_RELOAD_INTERVAL", config.DefaultWatchInterval.String()))
	fs.DurationVar(&f.reload, "reload-interval", reload, "how often the rules files are checked for changes [SLUICE_RELOAD_INTERVAL]")
	fs.StringVar(&f.pprofAddr, "pprof", serveEnv("SLUICE_PPROF_ADDR", ""), "debug listener with /debug/pprof/ (e.g. 127.0.0.1:6060; loopback only); empty: off [SLUICE_PPROF_ADDR]")
	storeTimeout, _ := time.ParseDuration(serveEnv("SLUICE_STORE_TIMEOUT", "0s"))
	fs.DurationVar(&f.storeTimeout, "store-timeout", storeTimeout, "bound on each Redis store call, e.g. 15ms (0: the store's default, 250ms); keep it below the caller's timeout [SLUICE_STORE_TIMEOUT]")
	headers, _ := strconv.ParseBool(serveEnv("SLUICE_RESPONSE_HEADERS", "false"))
	fs.BoolVar(&f.headers, "response-headers", headers, "add RateLimit-* headers to RLS responses [SLUICE_RESPONSE_HEADERS]")
	fs.StringVar(&f.requestRules, "request-rules", serveEnv("SLUICE_REQUEST_RULES", server.RequestRulesAny), "rules a request may choose (/v1/allow's rule, descriptors' limit override): any (within the --max-request-* ceilings), named (only limits of the config, by name), off [SLUICE_REQUEST_RULES]")
	fs.Int64Var(&f.maxRequestLogLimit, "max-request-log-limit", f.envInt64("max-request-log-limit", "SLUICE_MAX_REQUEST_LOG_LIMIT", server.DefaultMaxRequestLogLimit), "largest limit of a sliding_log rule supplied by a request [SLUICE_MAX_REQUEST_LOG_LIMIT]")
	fs.DurationVar(&f.maxRequestPeriod, "max-request-period", f.envDuration("max-request-period", "SLUICE_MAX_REQUEST_PERIOD", server.DefaultMaxRequestPeriod), "longest period of a rule supplied by a request [SLUICE_MAX_REQUEST_PERIOD]")
	fs.Int64Var(&f.maxRequestStateBytes, "max-request-state-bytes", f.envInt64("max-request-state-bytes", "SLUICE_MAX_REQUEST_STATE_BYTES", server.DefaultMaxRequestState), "largest state per key (bytes) of a rule supplied by a request: 16 per entry of a sliding log [SLUICE_MAX_REQUEST_STATE_BYTES]")
	fs.DurationVar(&f.readHeaderTimeout, "http-read-header-timeout", f.envDuration("http-read-header-timeout", "SLUICE_HTTP_READ_HEADER_TIMEOUT", server.DefaultReadHeaderTimeout), "longest time an HTTP client may take to send its request headers (slowloris) [SLUICE_HTTP_READ_HEADER_TIMEOUT]")
	fs.DurationVar(&f.idleTimeout, "http-idle-timeout", f.envDuration("http-idle-timeout", "SLUICE_HTTP_IDLE_TIMEOUT", server.DefaultIdleTimeout), "longest wait of a keep-alive HTTP connection for its next request [SLUICE_HTTP_IDLE_TIMEOUT]")
	fs.Int64Var(&f.maxHeaderBytes, "http-max-header-bytes", f.envInt64("http-max-header-bytes", "SLUICE_HTTP_MAX_HEADER_BYTES", server.DefaultMaxHeaderBytes), "largest request headers (bytes) on the HTTP port [SLUICE_HTTP_MAX_HEADER_BYTES]")
	fs.Int64Var(&f.maxConns, "http-max-conns", f.envInt64("http-max-conns", "SLUICE_HTTP_MAX_CONNS", server.DefaultMaxConns), "most open HTTP connections; one beyond it is closed at once; -1: no bound [SLUICE_HTTP_MAX_CONNS]")
}

// checkHTTPLimits reports the first problem of the HTTP connection settings, naming the flag.
func (f *serveFlags) checkHTTPLimits() error {
	for _, name := range []string{"http-read-header-timeout", "http-idle-timeout", "http-max-header-bytes", "http-max-conns"} {
		if msg, ok := f.envErrs[name]; ok {
			return errors.New(msg)
		}
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

// checkRequestRules reports the first problem of the request-rule settings, naming the flag;
// an environment value that did not parse is one unless the flag was given.
func (f *serveFlags) checkRequestRules(fs *flag.FlagSet) error {
	fs.Visit(func(fl *flag.Flag) { delete(f.envErrs, fl.Name) })
	for _, name := range []string{"max-request-log-limit", "max-request-period", "max-request-state-bytes"} {
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
	if f.maxRequestStateBytes < 1 {
		return fmt.Errorf("--max-request-state-bytes: must be positive, got %d", f.maxRequestStateBytes)
	}
	return nil
}

func serveEnv(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := stores.CheckMode(f.mode); err != nil {
		fmt.Fprintln(stderr, "sluice serve: --mode:", err)
		return 2
	}
	if f.storeTimeout < 0 {
		fmt.Fprintln(stderr, "sluice serve: --store-timeout: must not be negative, got", f.storeTimeout)
		return 2
	}
	if err := stores.CheckFallback(f.fallback); err != nil {
		fmt.Fprintln(stderr, "sluice serve: --fallback:", err)
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
	logger, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 2
	}
	// go-redis's own lines (failed dials, Sentinel switches) go through the same logger,
	// at most one a second, instead of plain text on standard error.
	redis.SetLogger(logger, redis.DefaultLogInterval)
	cfg := server.Config{
		GRPCAddr:        f.grpcAddr,
		HTTPAddr:        f.httpAddr,
		RulesPath:       f.config,
		ReloadInterval:  f.reload,
		StoreConfig:     stores.Config{URL: f.store, Mode: f.mode, Fallback: f.fallback, Timeout: f.storeTimeout},
		Logger:          logger,
		ResponseHeaders: f.headers,

		RequestRules:         f.requestRules,
		MaxRequestLogLimit:   f.maxRequestLogLimit,
		MaxRequestPeriod:     f.maxRequestPeriod,
		MaxRequestStateBytes: f.maxRequestStateBytes,

		ReadHeaderTimeout: f.readHeaderTimeout,
		IdleTimeout:       f.idleTimeout,
		MaxHeaderBytes:    int(f.maxHeaderBytes),
		MaxConns:          int(f.maxConns),
	}
	if f.config == "" {
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := server.Run(ctx, cfg); err != nil {
		fmt.Fprintln(stderr, "sluice serve:", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: want text or json, got %q", format)
}

// servePprof serves /debug/pprof/ on addr, which must be a loopback address: profiles
// reveal internals and cost CPU, so they are never exposed beyond the host.
func servePprof(addr string) (stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
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
