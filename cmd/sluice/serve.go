package main

import (
	"context"
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
