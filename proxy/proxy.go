package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/connlimit"
	"github.com/sluicehq/sluice/internal/gate"
	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server/admin"
	"github.com/sluicehq/sluice/server/rlsmetrics"
	"github.com/sluicehq/sluice/store"
)

// Defaults of Config's zero values.
const (
	DefaultAddr = "127.0.0.1:8000" // loopback, as sluice serve's

	DefaultAdminAddr       = "127.0.0.1:9000"
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultMaxHeaderBytes bounds a request's header block, as Envoy's 60 KiB default.
	DefaultMaxHeaderBytes = 64 << 10
)

// Config configures a Proxy. The zero value of every field is a documented default; a Proxy
// needs an Upstream and rules (RulesPath or Rules) with a proxy section.
type Config struct {
	// Upstream is the URL requests are forwarded to: scheme, host and an optional base path
	// that request paths are joined to. Required.
	Upstream string
	// Addr is the proxy's listen address (default DefaultAddr, loopback only: set e.g.
	// ":8000" to take traffic from the network).
	Addr string
	// AdminAddr is the listen address of /metrics, /healthz and /readyz (default
	// DefaultAdminAddr, loopback only); "-" disables it.
	AdminAddr string
	// RulesPath is a rules file or directory, watched for changes (config.Watcher); the
	// proxy sections of its documents say how requests become descriptors.
	RulesPath string
	// ReloadInterval is how often RulesPath is polled (default config.DefaultWatchInterval);
	// negative disables polling.
	ReloadInterval time.Duration
	// Rules are static rules, used when RulesPath is empty.
	Rules *config.Config
	// MaxLease is the longest lease a max_in_flight of the rules at RulesPath may ask for
	// (config.Options.MaxLease; 0: config.DefaultMaxLease, 10 minutes): a holder killed
	// without releasing locks its slot that long, unless the admin endpoint
	// DELETE /v1/leases clears it.
	MaxLease time.Duration
	// Store decides; when nil, the store StoreConfig describes is opened, and closed on
	// shutdown (see rls.Config).
	Store sluice.Store
	// StoreConfig names the store to open when Store is nil: URL, mode, fallback, timeout.
	StoreConfig store.Config
	// GlobalStore decides the limits of scope global (see rls.Config.GlobalStore); nil: the
	// store. Not closed by the proxy.
	GlobalStore sluice.Store
	// TrustedProxies are the addresses (CIDRs or bare IPs) of the proxies in front of this
	// one: X-Forwarded-For and Forwarded are believed only from them (package clientip).
	// Empty: the client address is the peer's.
	TrustedProxies []string
	// HeaderStyle selects the rate-limit headers of responses, as the httplimit middleware's
	// (default httplimit.HeadersBoth: the IETF draft's and X-RateLimit-*).
	HeaderStyle httplimit.HeaderStyle
	// Logger receives startup, reload, shutdown and (rate-limited) error lines; nothing per
	// request. Default: discard.
	Logger *slog.Logger
	// Registry receives the metrics; default a new registry.
	Registry *prometheus.Registry
	// ShutdownTimeout bounds the graceful drain of in-flight requests, WebSocket and
	// streaming responses included, after which they are cut (default
	// DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// Transport carries requests to the upstream (default: a clone of
	// http.DefaultTransport keeping up to 256 idle connections to the upstream, with
	// ResponseHeaderTimeout). A Transport set here brings its own timeouts.
	Transport http.RoundTripper
	// ResponseHeaderTimeout bounds the wait for the upstream's response headers once the
	// request is written, answered 504 (default DefaultResponseHeaderTimeout; negative: no
	// bound). It applies to the default Transport.
	ResponseHeaderTimeout time.Duration
	// UpstreamIdleTimeout bounds the silence between two reads of an upstream's response
	// body: past it, the upstream request is cancelled and the client's response aborted
	// (default DefaultUpstreamIdleTimeout; negative: no bound). Protocol upgrades
	// (WebSocket) are not bounded.
	UpstreamIdleTimeout time.Duration
	// FlushInterval is httputil.ReverseProxy's: 0 flushes streaming responses (unknown
	// length, text/event-stream) at once and others when done; negative flushes after
	// every write.
	FlushInterval time.Duration
	// RequestBodyTimeout bounds the silence between two reads of a request's body (default
	// DefaultRequestBodyTimeout; negative: no bound): a client that stops sending its body is
	// answered 408 and its upstream request ended, so slow uploads cannot hold upstream
	// connections. A body the client breaks (a malformed chunked encoding) is answered 400;
	// both count in sluice_proxy_client_errors_total, not as upstream errors.
	RequestBodyTimeout time.Duration
	// MaxConns bounds the client connections open at once: one accepted beyond it is closed
	// at once (sluice_proxy_connections_refused_total). Default: the process's open-file limit
	// less FDSpare, halved (each client connection may hold one to the upstream, which is
	// bounded to as many), at most DefaultMaxConns; negative: no bound.
	MaxConns int
	// FDSpare is the number of file descriptors the default MaxConns leaves for what must
	// go on when clients hold all the connections they may: rules reloads, the admin port
	// (itself bounded to 32 connections), the store's connections, logs (default
	// DefaultFDSpare).
	FDSpare int
}

// Proxy is a rate-limiting reverse proxy. Build it with New, run it with Serve.
type Proxy struct {
	cfg      Config
	log      *slog.Logger
	eng      *rls.Engine // decides, owns the rules, their watcher and the store
	gate     *gate.Gate  // the decision of a request (package internal/gate), holding the slots of max_in_flight
	registry *prometheus.Registry
	rp       *httputil.ReverseProxy
	upstream *url.URL
	// upstreamName is the upstream URL as logs show it: its userinfo and anything not known
	// to be harmless masked (store.Redact).
	upstreamName string
	metrics      *metrics
	// upstreamLog, clientLog and budgetLog throttle the lines of upstream errors, client
	// errors and budgets (streams cut, commits that failed).
	upstreamLog, clientLog, budgetLog logthrottle.Throttle
	serving                           atomic.Bool // between the start of Serve and the end of the drain

	lis, adminLis net.Listener
	http, admin   *http.Server
	base          context.Context // of every request; cancelled when the drain times out
	cancelBase    context.CancelFunc
	inflight      atomic.Int64
	draining      atomic.Bool
}

// New validates cfg, loads the rules, opens the store and listens on the addresses. Call
// Serve to answer requests, or Close to release what New acquired.
func New(cfg Config) (*Proxy, error) {
	p := &Proxy{cfg: cfg, log: cfg.Logger}
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if p.cfg.ShutdownTimeout <= 0 {
		p.cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.FDSpare < 0 {
		return nil, fmt.Errorf("proxy: fd-spare: must not be negative, got %d", cfg.FDSpare)
	}
	u, err := parseUpstream(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	p.upstream, p.upstreamName = u, store.Redact(cfg.Upstream)
	resolver, err := clientip.New(cfg.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p.registry = cfg.Registry
	if p.registry == nil {
		p.registry = prometheus.NewRegistry()
	}
	engMetrics, err := rlsmetrics.New(p.registry, rlsmetrics.Options{})
	if err != nil {
		return nil, fmt.Errorf("proxy: metrics: %w", err)
	}
	eng, err := rls.New(rls.Config{RulesPath: cfg.RulesPath, ReloadInterval: cfg.ReloadInterval, Rules: cfg.Rules,
		RulesOptions: config.Options{MaxLease: cfg.MaxLease},
		Store:        cfg.Store, StoreConfig: cfg.StoreConfig, GlobalStore: cfg.GlobalStore, Logger: p.log, Observer: engMetrics, RequestRules: rls.RequestRulesOff, InFlight: true})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p.eng = eng
	if err := engMetrics.Attach(eng); err != nil {
		_ = eng.Close()
		return nil, fmt.Errorf("proxy: metrics: %w", err)
	}
	if err := gate.CheckLeaser(eng.Rules(), eng.Limiter().Store()); err != nil {
		_ = eng.Close()
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if p.metrics, err = newMetrics(p.registry); err != nil {
		_ = eng.Close()
		return nil, fmt.Errorf("proxy: metrics: %w", err)
	}
	p.gate = gate.New(eng, resolver, cfg.HeaderStyle, p.log, p.metrics.releaseFailures.Inc)
	if len(p.gate.DomainNames()) == 0 {
		_ = eng.Close()
		return nil, fmt.Errorf("proxy: rules: no document has a proxy section (proxy: rate_limits: [{actions: [...]}]): nothing would be limited")
	}
	p.rp = p.reverseProxy()
	if err := p.listen(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// parseUpstream checks the upstream URL: http or https, with a host. Its errors show the URL
// redacted (store.Redact), never its userinfo.
func parseUpstream(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("proxy: upstream: missing (want a URL such as http://127.0.0.1:3000)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("proxy: upstream: %s does not parse: %s", store.Redact(raw), redact.ParseError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("proxy: upstream: scheme of %s: want http or https", store.Redact(raw))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("proxy: upstream: %s has no host", store.Redact(raw))
	}
	return u, nil
}

func (p *Proxy) listen() error {
	addr := p.cfg.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("proxy: addr: %w", err)
	}
	if n := p.cfg.maxConns(); n > 0 {
		lis = connlimit.Listener(lis, n, p.metrics.connsRefused.Inc)
	}
	p.lis = lis
	p.base, p.cancelBase = context.WithCancel(context.Background())
	p.http = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return p.base },
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	adminAddr := p.cfg.AdminAddr
	if adminAddr == "" {
		adminAddr = DefaultAdminAddr
	}
	if adminAddr == "-" {
		return nil
	}
	if p.adminLis, err = net.Listen("tcp", adminAddr); err != nil {
		return fmt.Errorf("proxy: admin-addr: %w", err)
	}
	p.adminLis = connlimit.Listener(p.adminLis, adminMaxConns, nil)
	p.admin = &http.Server{Handler: p.adminHandler(), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	return nil
}

// adminHandler is the engine's admin endpoints (package server/admin), with /readyz failing
// as soon as the drain starts, so that load balancers stop sending before the listener closes.
func (p *Proxy) adminHandler() http.Handler {
	endpoints := admin.Handler(admin.Config{Engine: p.eng, Metrics: p.registry, Serving: p.serving.Load})
	mux := http.NewServeMux()
	mux.Handle("/", endpoints)
	mux.HandleFunc("DELETE /v1/leases", p.clearLeases)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if p.draining.Load() {
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
			return
		}
		endpoints.ServeHTTP(w, r)
	})
	return mux
}

// Addr returns the address the proxy listens on.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// AdminAddr returns the address of the admin endpoints ("" when disabled).
func (p *Proxy) AdminAddr() string {
	if p.adminLis == nil {
		return ""
	}
	return p.adminLis.Addr().String()
}

// Registry returns the registry of the metrics.
func (p *Proxy) Registry() *prometheus.Registry { return p.registry }

// Reload checks the rules files now (as the periodic poll does); see rls.Engine.Reload.
func (p *Proxy) Reload() (bool, error) { return p.eng.Reload() }

// Serve proxies until ctx is done, then shuts down gracefully: /readyz fails, the listener
// closes, in-flight requests (WebSockets and streams included) finish for up to
// ShutdownTimeout and are then cut, and the store is closed. It returns the first serving
// error.
func (p *Proxy) Serve(ctx context.Context) error {
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watchDone := make(chan struct{})
	go func() { p.eng.Run(watchCtx); close(watchDone) }() // the rules watcher
	p.serving.Store(true)
	errc := make(chan error, 2)
	serve := func(s *http.Server, l net.Listener) {
		if err := s.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}
	go serve(p.http, p.lis)
	if p.admin != nil {
		go serve(p.admin, p.adminLis)
	}
	p.log.Info("sluice proxy serving", "addr", p.Addr(), "admin", p.AdminAddr(), "upstream", p.upstreamName,
		"domains", p.gate.DomainNames(), "max_conns", p.cfg.maxConns(), "request_body_timeout", p.cfg.bodyTimeout())
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		p.log.Error("proxy failed", "err", err)
	}
	p.drain()
	p.serving.Store(false)
	stopWatch()
	<-watchDone
	_ = p.gate.Close()
	_ = p.eng.Close() // flushes the store's decorators
	if p.admin != nil {
		_ = p.admin.Close()
	}
	return err
}

// drain stops accepting and waits up to ShutdownTimeout for in-flight requests, hijacked
// WebSocket connections included (http.Server.Shutdown does not wait for those), then
// cancels what is left.
func (p *Proxy) drain() {
	p.draining.Store(true)
	p.log.Info("shutting down: draining in-flight requests", "timeout", p.cfg.ShutdownTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout)
	defer cancel()
	err := p.http.Shutdown(ctx)
	for err == nil && p.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err != nil {
		p.log.Warn("drain timed out: cutting the requests left", "in_flight", p.inflight.Load())
	}
	p.cancelBase() // ends upstream calls and WebSocket copies still running
	_ = p.http.Close()
}

// Close releases what New acquired without a graceful shutdown. Serve calls what it needs;
// Close is for a Proxy that is not served.
func (p *Proxy) Close() error {
	if p.cancelBase != nil {
		p.cancelBase()
	}
	for _, s := range []*http.Server{p.http, p.admin} {
		if s != nil {
			_ = s.Close()
		}
	}
	for _, l := range []net.Listener{p.lis, p.adminLis} {
		if l != nil {
			_ = l.Close()
		}
	}
	if p.gate != nil {
		_ = p.gate.Close()
	}
	return p.eng.Close()
}
