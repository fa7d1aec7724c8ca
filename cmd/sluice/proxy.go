package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/proxy"
)

func init() {
	register(command{name: "proxy", summary: "run a rate-limiting reverse proxy in front of an HTTP upstream", run: runProxy})
}

// proxyFlags are the flags of proxy, each defaulting to its SLUICE_* environment variable.
type proxyFlags struct {
	sharedFlags
	upstream, addr, adminAddr, trustedProxies, headers string
	storePrefix                                        string
	adminPublic                                        bool
	shutdownTimeout, headerTimeout, idleTimeout        time.Duration
	bodyTimeout                                        time.Duration
	maxConns, fdSpare                                  int
	maxLease                                           time.Duration
	style                                              httplimit.HeaderStyle // of headers, once checked
}

func (f *proxyFlags) register(fs *flag.FlagSet) {
	f.sharedFlags.register(fs, "rules file or directory with a proxy section (how requests become descriptors), watched for changes; required", plainEnv)
	fs.StringVar(&f.upstream, "upstream", plainEnv("", "SLUICE_UPSTREAM", ""), "URL requests are forwarded to, e.g. http://127.0.0.1:3000; required [SLUICE_UPSTREAM]")
	fs.StringVar(&f.addr, "http-addr", plainEnv("", "SLUICE_PROXY_ADDR", proxy.DefaultAddr), "listen address of the proxy [SLUICE_PROXY_ADDR]")
	fs.StringVar(&f.storePrefix, "store-prefix", plainEnv("", "SLUICE_STORE_PREFIX", ""), "prefix of every key in a shared store (default sluice:) [SLUICE_STORE_PREFIX]")
	fs.StringVar(&f.adminAddr, "admin-addr", plainEnv("", "SLUICE_ADMIN_ADDR", proxy.DefaultAdminAddr), "listen address of /metrics, /healthz, /readyz, /v1/top and /ui (loopback unless --admin-public), - to disable [SLUICE_ADMIN_ADDR]")
	public, _ := strconv.ParseBool(plainEnv("", "SLUICE_ADMIN_PUBLIC", "false"))
	fs.BoolVar(&f.adminPublic, "admin-public", public, "allow --admin-addr on a non-loopback address: the metrics and the live view become reachable from the network [SLUICE_ADMIN_PUBLIC]")
	header, _ := time.ParseDuration(plainEnv("", "SLUICE_UPSTREAM_RESPONSE_HEADER_TIMEOUT", proxy.DefaultResponseHeaderTimeout.String()))
	fs.DurationVar(&f.headerTimeout, "upstream-response-header-timeout", header, "longest wait for the upstream's response headers once the request is sent, answered 504; 0: no bound [SLUICE_UPSTREAM_RESPONSE_HEADER_TIMEOUT]")
	idle, _ := time.ParseDuration(plainEnv("", "SLUICE_UPSTREAM_IDLE_TIMEOUT", proxy.DefaultUpstreamIdleTimeout.String()))
	fs.DurationVar(&f.idleTimeout, "upstream-idle-timeout", idle, "longest silence of an upstream's response body before the response is aborted (not WebSockets); 0: no bound [SLUICE_UPSTREAM_IDLE_TIMEOUT]")
	fs.StringVar(&f.trustedProxies, "trusted-proxies", plainEnv("", "SLUICE_TRUSTED_PROXIES", ""), "comma-separated CIDRs or addresses of the proxies in front of this one, whose X-Forwarded-For and Forwarded are believed; empty: the client is the peer [SLUICE_TRUSTED_PROXIES]")
	fs.StringVar(&f.headers, "headers", plainEnv("", "SLUICE_RATELIMIT_HEADERS", httplimit.HeadersBoth.String()), "rate-limit headers of responses: both (the IETF draft's RateLimit-Policy and RateLimit, and X-RateLimit-*), ietf, x or none; Retry-After comes with every 429 [SLUICE_RATELIMIT_HEADERS]")
	body, _ := time.ParseDuration(plainEnv("", "SLUICE_REQUEST_BODY_TIMEOUT", proxy.DefaultRequestBodyTimeout.String()))
	fs.DurationVar(&f.bodyTimeout, "request-body-timeout", body, "longest silence between two reads of a request's body: past it the client is answered 408 and the upstream request ended (slow uploads hold no upstream connection); 0: no bound [SLUICE_REQUEST_BODY_TIMEOUT]")
	conns, _ := strconv.Atoi(plainEnv("", "SLUICE_PROXY_MAX_CONNS", "0"))
	fs.IntVar(&f.maxConns, "max-conns", conns, "most client connections open at once, one more is closed at once; 0: the open-file limit less --fd-spare, halved (each may hold an upstream connection), at most 10000; -1: no bound [SLUICE_PROXY_MAX_CONNS]")
	spare, _ := strconv.Atoi(plainEnv("", "SLUICE_FD_SPARE", strconv.Itoa(proxy.DefaultFDSpare)))
	fs.IntVar(&f.fdSpare, "fd-spare", spare, "file descriptors the default --max-conns leaves spare for rules reloads, the admin port (32 connections at most), the store and logs [SLUICE_FD_SPARE]")
	lease, _ := time.ParseDuration(plainEnv("", "SLUICE_MAX_LEASE", config.DefaultMaxLease.String()))
	fs.DurationVar(&f.maxLease, "max-lease", lease, "longest lease a max_in_flight may ask for: a holder killed without releasing locks its slot that long (DELETE /v1/leases on the admin address frees a descriptor's slots at once); at most 24h [SLUICE_MAX_LEASE]")
	timeout, _ := time.ParseDuration(plainEnv("", "SLUICE_SHUTDOWN_TIMEOUT", proxy.DefaultShutdownTimeout.String()))
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", timeout, "how long in-flight requests (WebSockets and streams too) may take to finish on SIGTERM/SIGINT before they are cut [SLUICE_SHUTDOWN_TIMEOUT]")
}

// check reports the first invalid flag, naming it.
func (f *proxyFlags) check() error {
	switch {
	case f.upstream == "":
		return errors.New("--upstream: required (the URL requests are forwarded to, e.g. http://127.0.0.1:3000)")
	case f.config == "":
		return errors.New("--config: required (a rules file or directory with a proxy section)")
	case f.shutdownTimeout <= 0:
		return fmt.Errorf("--shutdown-timeout: must be positive, got %v", f.shutdownTimeout)
	case f.headerTimeout < 0:
		return fmt.Errorf("--upstream-response-header-timeout: must not be negative (0: no bound), got %v", f.headerTimeout)
	case f.idleTimeout < 0:
		return fmt.Errorf("--upstream-idle-timeout: must not be negative (0: no bound), got %v", f.idleTimeout)
	case f.bodyTimeout < 0:
		return fmt.Errorf("--request-body-timeout: must not be negative (0: no bound), got %v", f.bodyTimeout)
	case f.maxConns < -1:
		return fmt.Errorf("--max-conns: want a positive number, 0 (from the open-file limit) or -1 (no bound), got %d", f.maxConns)
	case f.fdSpare < 0:
		return fmt.Errorf("--fd-spare: must not be negative, got %d", f.fdSpare)
	case f.maxLease < sluice.MinLease || f.maxLease > sluice.MaxLease:
		return fmt.Errorf("--max-lease: must be between %v and %v, got %v", sluice.MinLease, sluice.MaxLease, f.maxLease)
	}
	if f.adminAddr != "-" {
		loopback, err := isLoopback(f.adminAddr)
		if err != nil {
			return fmt.Errorf("--admin-addr: %w", err)
		}
		if !loopback && !f.adminPublic {
			return fmt.Errorf("--admin-addr: %q is not a loopback address: the metrics and the live view would be reachable from the network; add --admin-public to allow it", f.adminAddr)
		}
	}
	style, err := httplimit.ParseHeaderStyle(f.headers)
	if err != nil {
		return fmt.Errorf("--headers: want both, ietf, x or none, got %q", f.headers)
	}
	f.style = style
	if _, err := clientip.New(list(f.trustedProxies)); err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	return f.sharedFlags.check()
}

// isLoopback reports whether the listen address addr (host:port) is on a loopback
// interface only: "localhost" or a loopback IP; an empty host (all interfaces) is not.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback()), nil
}

// orDisabled maps a flag's 0 ("no bound") to the negative duration of the Config fields.
func orDisabled(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// list splits a comma-separated flag value, dropping empty items.
func list(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func runProxy(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	var f proxyFlags
	f.register(fs)
	alias(fs, "addr", "http-addr", stderr, false, nil)
	if code, done := parseFlags("proxy", fs, &proxyHelp, args, stdout, stderr); done {
		return code
	}
	if err := f.check(); err != nil {
		fmt.Fprintln(stderr, "sluice proxy:", err)
		return 2
	}
	logger, err := f.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sluice proxy:", err)
		return 2
	}
	if loopback, _ := isLoopback(f.adminAddr); f.adminAddr != "-" && !loopback {
		logger.Warn("admin listener on a non-loopback address (--admin-public): /metrics, /v1/top and /ui are reachable from the network",
			"admin", f.adminAddr)
	}
	global, closeRegions, err := f.regions.open(f.storePrefix, f.storeTLS.tls, logger)
	if err != nil {
		fmt.Fprintln(stderr, "sluice proxy:", err)
		return 2
	}
	defer closeRegions()
	p, err := proxy.New(proxy.Config{
		GlobalStore:     global,
		Upstream:        f.upstream,
		Addr:            f.addr,
		AdminAddr:       f.adminAddr,
		RulesPath:       f.config,
		ReloadInterval:  f.reload,
		StoreConfig:     f.storeConfig(f.storePrefix),
		TrustedProxies:  list(f.trustedProxies),
		HeaderStyle:     f.style,
		Logger:          logger,
		ShutdownTimeout: f.shutdownTimeout,
		MaxLease:        f.maxLease,

		ResponseHeaderTimeout: orDisabled(f.headerTimeout),
		UpstreamIdleTimeout:   orDisabled(f.idleTimeout),
		RequestBodyTimeout:    orDisabled(f.bodyTimeout),
		MaxConns:              f.maxConns,
		FDSpare:               f.fdSpare,
	})
	if err != nil {
		fmt.Fprintln(stderr, "sluice proxy:", err)
		return 1
	}

	announceStore(logger, f.storeConfig(f.storePrefix))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := p.Serve(ctx); err != nil {
		fmt.Fprintln(stderr, "sluice proxy:", err)
		return 1
	}
	return 0
}
