package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redis"
)

// sharedFlags are the flags serve and proxy share: the rules, the store and the logs, each
// defaulting to its SLUICE_* environment variable.
type sharedFlags struct {
	config, store, mode, fallback string
	logLevel, logFormat           string
	reload, storeTimeout          time.Duration
	storeTLS                      storeTLSFlags // storetls.go
	regions                       regionsFlags  // regions.go
}

// envFunc gives a flag's default: the value of the environment variable name when it is set,
// else def. serve's (serveFlags.env) also reads envoyproxy/ratelimit's settings.
type envFunc func(flagName, name, def string) string

// plainEnv is the envFunc of the SLUICE_* variables alone.
func plainEnv(_, name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// register defines the shared flags on fs, with their defaults from env; configUsage
// describes --config for the command.
func (f *sharedFlags) register(fs *flag.FlagSet, configUsage string, env envFunc) {
	fs.StringVar(&f.config, "config", env("config", "SLUICE_CONFIG", ""), configUsage+" [SLUICE_CONFIG]")
	fs.StringVar(&f.store, "store", env("store", "SLUICE_STORE", "memory"), "store URL: memory, redis://host:port/db, rediss://..., redis-cluster://host:port,host:port, redis-sentinel://host:port,host:port/MASTER, memcached://host:port,host:port [SLUICE_STORE]")
	fs.StringVar(&f.mode, "mode", env("mode", "SLUICE_MODE", "sync"), "distribution mode: sync, overlimit or async [SLUICE_MODE]")
	fs.StringVar(&f.fallback, "fallback", env("fallback", "SLUICE_FALLBACK", ""), "policy while the store is down: local, fail_open, fail_closed; empty: answer UNAVAILABLE (proxy: 503) [SLUICE_FALLBACK]")
	fs.StringVar(&f.logLevel, "log-level", env("log-level", "SLUICE_LOG_LEVEL", "info"), "log level: debug, info, warn, error [SLUICE_LOG_LEVEL]")
	fs.StringVar(&f.logFormat, "log-format", env("log-format", "SLUICE_LOG_FORMAT", "text"), "log format: text or json [SLUICE_LOG_FORMAT]")
	reload, _ := time.ParseDuration(env("reload-interval", "SLUICE_RELOAD_INTERVAL", config.DefaultWatchInterval.String()))
	fs.DurationVar(&f.reload, "reload-interval", reload, "how often the rules files are checked for changes [SLUICE_RELOAD_INTERVAL]")
	storeTimeout, _ := time.ParseDuration(env("store-timeout", "SLUICE_STORE_TIMEOUT", "0s"))
	f.storeTLS.register(fs, env)
	f.regions.register(fs, env)
	fs.DurationVar(&f.storeTimeout, "store-timeout", storeTimeout, "bound on each Redis or memcached store call, e.g. 15ms (0: the store's default, 250ms, and the fallback's, 50ms); with --fallback, a slower call is decided by the fallback; keep it below the caller's timeout [SLUICE_STORE_TIMEOUT]")
}

// check reports the first invalid store flag, naming it.
func (f *sharedFlags) check() error {
	if err := store.CheckMode(f.mode); err != nil {
		return fmt.Errorf("--mode: %w", err)
	}
	if err := store.CheckModeOn(f.store, f.mode); err != nil {
		return fmt.Errorf("--mode: %w (--store %s)", err, store.Redact(f.store))
	}
	if f.storeTimeout < 0 {
		return fmt.Errorf("--store-timeout: must not be negative, got %v", f.storeTimeout)
	}
	if err := store.CheckFallback(f.fallback); err != nil {
		return fmt.Errorf("--fallback: %w", err)
	}
	if _, err := f.regions.parse(); err != nil {
		return err
	}
	return f.storeTLS.check()
}

// storeConfig is the store the flags name, its keys under prefix ("": the store's default).
func (f *sharedFlags) storeConfig(prefix string) store.Config {
	return store.Config{Backend: store.Backend{URL: f.store, Timeout: f.storeTimeout, Prefix: prefix, TLS: f.storeTLS.tls}, Decorators: store.Decorators{Mode: f.mode, Fallback: f.fallback}}
}

// logger builds the logger of --log-level and --log-format on w, and sends go-redis's own
// lines (failed dials, Sentinel switches) through it, at most one a second, instead of plain
// text on standard error.
func (f *sharedFlags) logger(w io.Writer) (*slog.Logger, error) {
	l, err := newLogger(w, f.logLevel, f.logFormat)
	if err != nil {
		return nil, err
	}
	redis.SetLogger(l, redis.DefaultLogInterval)
	return l, nil
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
