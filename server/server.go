package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/stores"
)

// Defaults of Config's zero values.
const (
	DefaultGRPCAddr             = "127.0.0.1:8081"
	DefaultHTTPAddr             = "127.0.0.1:8080"
	DefaultMaxDescriptors       = 64
	DefaultMaxDescriptorEntries = 16
	DefaultMaxBodyBytes         = 4 << 20
	DefaultShutdownTimeout      = 10 * time.Second
	DefaultStreamWorkers        = 256
	// DefaultReadHeaderTimeout bounds how long an HTTP client may take to send its request
	// headers: a slowloris connection is closed after it.
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConns          = 10_000
	// DefaultMaxRequestLogLimit keeps one call of the Redis sliding-log script to a few
	// milliseconds (1.4 to 1.7 ms median; docs/OPERATIONS.md has the measurement).
	DefaultMaxRequestLogLimit = 1000
	DefaultMaxRequestPeriod   = sluice.MaxPeriod
	DefaultMaxRequestState    = 16 << 10
)

// The values of Config.RequestRules.
const (
	// RequestRulesAny accepts rules supplied by requests, within the ceilings (the default).
	RequestRulesAny = "any"
	// RequestRulesNamed accepts only rules named by the request and defined in the rules
	// config: "rule": "<domain>.<descriptor path>" or "<rate_limit name>" in /v1/allow.
	RequestRulesNamed = "named"
	// RequestRulesOff refuses /v1/allow's key form and descriptors' limit overrides.
	RequestRulesOff = "off"
)

// Config configures a Server. The zero value of every field is a documented default; a
// Server needs rules (RulesPath or Rules).
type Config struct {
	// GRPCAddr is the RLS gRPC listen address (default DefaultGRPCAddr); "-" disables gRPC.
	GRPCAddr string
	// HTTPAddr is the HTTP API, metrics and health listen address (default DefaultHTTPAddr);
	// "-" disables HTTP.
	HTTPAddr string
	// RulesPath is a rules file or directory, watched for changes (see config.Watcher).
	RulesPath string
	// ReloadInterval is how often RulesPath is polled (default config.DefaultWatchInterval);
	// negative disables polling (Reload still works).
	ReloadInterval time.Duration
	// Rules are static rules, used when RulesPath is empty (e.g. embedded defaults).
	Rules *config.Config
	// Store decides; when nil, the store StoreConfig describes is opened (stores.Open) and
	// closed on shutdown. A Store passed here is not closed by the server.
	Store sluice.Store
	// StoreConfig names the store to open when Store is nil: URL, distribution mode,
	// fallback and per-call timeout (default: memory, sync mode, no fallback). With a
	// fallback, the server hooks its OnStateChange and OnStoreError (calling any set here
	// too) to log each change, count the failures and report the state in the metrics and
	// /readyz; a fallback inside a Store passed above is not observed.
	StoreConfig stores.Config
	// Logger receives startup, reload, shutdown, (rate-limited) store error lines, and each
	// change of the fallback's state; nothing is logged per request. Default: discard.
	Logger *slog.Logger
	// Registry receives the metrics; default a new registry of the server's own.
	Registry *prometheus.Registry
	// MaxDescriptors bounds the descriptors of a request (default DefaultMaxDescriptors),
	// MaxDescriptorEntries the entries of one descriptor (default
	// DefaultMaxDescriptorEntries); MaxKeyLength bounds a descriptor's store key (default
	// sluice.DefaultMaxKeyLength); MaxBodyBytes bounds an HTTP body (default
	// DefaultMaxBodyBytes).
	MaxDescriptors, MaxDescriptorEntries, MaxKeyLength int
	MaxBodyBytes                                       int64
	// ResponseHeaders adds RateLimit-Limit, -Remaining and -Reset headers (names:
	// ResponseHeaderNames) to RLS responses (response_headers_to_add), for Envoy to pass to
	// the client: the requests_per_unit, limit_remaining and duration_until_reset (seconds) of
	// the descriptor closest to its limit, as envoyproxy/ratelimit's
	// LIMIT_RESPONSE_HEADERS_ENABLED.
	ResponseHeaders bool
	// ShutdownTimeout bounds the graceful shutdown (default DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// RequestRules says which rules a request may bring: RequestRulesAny (default, also
	// ""), RequestRulesNamed or RequestRulesOff. It covers the rule of /v1/allow's key form
	// and the limit override of a descriptor (RLS and HTTP).
	RequestRules string
	// MaxRequestLogLimit bounds the limit of a sliding_log rule supplied by a request (default
	// DefaultMaxRequestLogLimit, at most sluice.MaxSlidingLogLimit): one call of the sliding
	// log's Redis script inserts or removes up to that many entries, and no other decision on
	// that Redis runs meanwhile. MaxRequestPeriod bounds the period of a rule supplied by a
	// request (default DefaultMaxRequestPeriod, at most sluice.MaxPeriod): how long its state
	// is kept. MaxRequestStateBytes bounds algorithm.StateBytes of a rule supplied by a
	// request (default DefaultMaxRequestState). Each is checked before any store call; rules
	// of the rules config are not bounded by them.
	MaxRequestLogLimit   int64
	MaxRequestPeriod     time.Duration
	MaxRequestStateBytes int64
	// RulesOptions say how the rules at RulesPath are read and compiled: the default
	// algorithm, merged domains, envoyproxy/ratelimit's runtime directory tree. The default
	// algorithm is also that of limit overrides (RateLimitDescriptor.limit).
	RulesOptions config.Options
	// GlobalShadowMode answers OK to every request that would be over its limit, counting it
	// in ratelimit_service_global_shadow_mode (envoyproxy/ratelimit's SHADOW_MODE).
	GlobalShadowMode bool
	// CountDenied decides as envoyproxy/ratelimit does: each descriptor on its own, and the
	// hits of a request over a limit are counted all the same (with the fixed_window default
	// algorithm, the peer's answers exactly). By default a request over one limit consumes
	// nothing (envoyproxy/ratelimit issue #427).
	CountDenied bool
	// GlobalQuotaMode puts every configured limit in quota mode (QUOTA_MODE): a request is
	// over its limit only when every one of its limited descriptors is.
	GlobalQuotaMode bool
	// NearLimitRatio is the share of a limit past which hits count as near_limit in the
	// envoyproxy/ratelimit metrics (default DefaultNearLimitRatio).
	NearLimitRatio float64
	// ResponseHeaderNames name the ResponseHeaders: limit, remaining, reset; an empty name
	// keeps its default (DefaultResponseHeaderNames).
	ResponseHeaderNames [3]string
	// MetricsAddr, when set, also serves the metrics on a listener of its own, at MetricsPath
	// (default /metrics): envoyproxy/ratelimit's PROMETHEUS_ADDR and PROMETHEUS_PATH.
	MetricsAddr, MetricsPath string
	// GRPCMaxConnectionAge, when positive, closes each gRPC connection after about that long
	// (with a GOAWAY, jittered by 10%), so clients reconnect and spread over the instances;
	// GRPCMaxConnectionAgeGrace bounds how long its calls may then take. Zero: no limit.
	// envoyproxy/ratelimit's GRPC_MAX_CONNECTION_AGE (24h) and _GRACE (1h).
	GRPCMaxConnectionAge, GRPCMaxConnectionAgeGrace time.Duration
	// DebugAddr, when set, serves envoyproxy/ratelimit's debug endpoint /rlconfig on a
	// listener of its own (its DEBUG_HOST:DEBUG_PORT); /rlconfig is on the HTTP API too.
	DebugAddr string
	// StreamWorkers is the number of long-lived goroutines answering RLS calls (default
	// DefaultStreamWorkers): a call finds a worker whose stack has already grown instead of
	// a new goroutine growing its stack each time; calls beyond it get their own goroutine,
	// as without workers. Negative: no workers.
	StreamWorkers int
	// Quota configures the RLQS quota service served on the gRPC port (quota.go); its
	// Rules are the server's, its Observer the server's metrics.
	Quota rlqs.Config
	// ReadHeaderTimeout bounds the time an HTTP client may take to send a request's headers
	// (default DefaultReadHeaderTimeout); IdleTimeout how long a keep-alive connection may
	// wait for its next request (default DefaultIdleTimeout); MaxHeaderBytes the size of a
	// request's headers (default DefaultMaxHeaderBytes). MaxConns bounds the open HTTP
	// connections (default DefaultMaxConns; negative: no bound): a connection accepted
	// beyond it is closed at once, so slow clients cannot exhaust the file descriptors.
	ReadHeaderTimeout, IdleTimeout time.Duration
	MaxHeaderBytes, MaxConns       int
}

// Server is a running rate-limit service. Build it with New, run it with Serve.
type Server struct {
	cfg             Config
	log             *slog.Logger
	store           sluice.Store
	storeCloser     io.Closer // the store it opened; nil for Config.Store
	limiter         *sluice.Limiter
	layered         *sluice.Limiter // limiter and per-instance limits (layered.go)
	localStore      io.Closer
	rules           atomic.Pointer[rules]
	watcher         *config.Watcher
	metrics         *metrics
	registry        *prometheus.Registry
	maxDescriptors  int
	maxDescEntries  int
	maxKeyLen       int
	requestRules    requestRules
	responseHeaders bool
	lastStoreLog    atomic.Int64
	policy          policyMetrics // criticality.go

	grpcLis, httpLis net.Listener
	grpc             *grpc.Server
	health           *health.Server
	http             *http.Server
	ready            atomic.Bool
	readyCheck       readiness
	fallback         *fallbackWatch // the fallback of the store the server opened; nil without
	quota            *rlqs.Service
	quotaMetrics     *quotaMetrics // quotametrics.go
	closeOnce        sync.Once

	// envoyproxy/ratelimit compatibility (peer.go, peermetrics.go)
	peer             *peerMetrics
	unknown          unknownDomains
	side             []sideListener
	globalShadow     bool
	globalQuota      bool
	nearLimitRatio   float64
	headerNames      [3]string
	defaultAlgorithm sluice.Algorithm
}

// New validates cfg, loads the rules, opens the store and listens on the addresses. Call
// Serve to answer requests, or Close to release what New acquired.
func New(cfg Config) (*Server, error) {
	s := &Server{cfg: cfg, log: cfg.Logger, registry: cfg.Registry,
		maxDescriptors:  orDefault(cfg.MaxDescriptors, DefaultMaxDescriptors),
		maxDescEntries:  orDefault(cfg.MaxDescriptorEntries, DefaultMaxDescriptorEntries),
		maxKeyLen:       orDefault(cfg.MaxKeyLength, sluice.DefaultMaxKeyLength),
		responseHeaders: cfg.ResponseHeaders, globalShadow: cfg.GlobalShadowMode, globalQuota: cfg.GlobalQuotaMode,
		nearLimitRatio: cfg.NearLimitRatio, headerNames: cfg.ResponseHeaderNames, defaultAlgorithm: cfg.RulesOptions.DefaultAlgorithm}
	if s.nearLimitRatio <= 0 {
		s.nearLimitRatio = DefaultNearLimitRatio
	}
	for i, n := range s.headerNames {
		if n == "" {
			s.headerNames[i] = DefaultResponseHeaderNames[i]
		}
	}
	if !s.defaultAlgorithm.Valid() {
		s.defaultAlgorithm = sluice.AlgorithmSlidingWindow
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	if s.cfg.MaxBodyBytes <= 0 {
		s.cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if s.cfg.ShutdownTimeout <= 0 {
		s.cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	rr, err := newRequestRules(cfg)
	if err != nil {
		return nil, err
	}
	s.requestRules = rr
	m, err := newMetrics(s.registry)
	if err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	s.metrics = m
	if s.peer, err = newPeerMetrics(s.registry); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	if err := s.registerPolicyMetrics(); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	if s.quotaMetrics, err = newQuotaMetrics(s.registry, s); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	if err := s.loadRules(); err != nil {
		return nil, err
	}
	if err := s.openStore(); err != nil {
		return nil, err
	}
	if err := s.listen(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

func orDefaultDuration(v, d time.Duration) time.Duration {
	if v <= 0 {
		return d
	}
	return v
}

func (s *Server) loadRules() error {
	switch {
	case s.cfg.RulesPath != "":
		w, err := config.NewWatcherWith(s.cfg.RulesPath, s.cfg.RulesOptions, func(c *config.Config) {
			s.setRules(c)
			s.metrics.reloads.WithLabelValues("success").Inc()
			s.log.Info("rules reloaded", "path", s.cfg.RulesPath, "domains", c.Domains(), "limits", len(c.Limits()))
		}, func(err error) {
			s.metrics.reloads.WithLabelValues("failure").Inc()
			s.peer.configLoadError.Inc()
			s.log.Error("rules reload rejected; the previous rules keep serving", "path", s.cfg.RulesPath, "err", err)
		})
		if err != nil {
			s.peer.configLoadError.Inc()
			return fmt.Errorf("server: rules: %w", err)
		}
		s.watcher = w
		s.setRules(w.Config())
	case s.cfg.Rules != nil:
		s.setRules(s.cfg.Rules)
	default:
		return errors.New("server: rules: set Config.RulesPath or Config.Rules")
	}
	return nil
}

func (s *Server) openStore() error {
	s.store = s.cfg.Store
	if s.store == nil {
		sc := s.cfg.StoreConfig
		if sc.Fallback != "" {
			w, err := watchFallback(&sc, sc.Fallback, s.log, s.registry, s.fallbackError)
			if err != nil {
				return fmt.Errorf("server: metrics: %w", err)
			}
			s.fallback = w
		}
		st, closer, err := stores.Open(context.Background(), sc)
		if err != nil {
			return err
		}
		s.store, s.storeCloser = st, closer
	}
	s.limiter = sluice.New(s.store)
	s.readyCheck.store = s.store
	return s.openLocal()
}

func (s *Server) listen() error {
	grpcAddr, httpAddr := s.cfg.GRPCAddr, s.cfg.HTTPAddr
	if grpcAddr == "" {
		grpcAddr = DefaultGRPCAddr
	}
	if httpAddr == "" {
		httpAddr = DefaultHTTPAddr
	}
	if grpcAddr != "-" {
		lis, err := net.Listen("tcp", grpcAddr)
		if err != nil {
			return fmt.Errorf("server: grpc-addr: %w", err)
		}
		s.grpcLis = lis
		s.grpc = grpc.NewServer(s.grpcOptions()...)
		s.grpc.RegisterService(&rlsServiceDesc, rlsService{s: s})
		s.registerQuota()
		s.health = health.NewServer()
		healthpb.RegisterHealthServer(s.grpc, s.health)
		reflection.Register(s.grpc)
	}
	if httpAddr != "-" {
		lis, err := net.Listen("tcp", httpAddr)
		if err != nil {
			return fmt.Errorf("server: http-addr: %w", err)
		}
		if s.cfg.MaxConns >= 0 {
			lis = limitConns(lis, orDefault(s.cfg.MaxConns, DefaultMaxConns))
		}
		s.httpLis = lis
		s.http = &http.Server{
			Handler:           s.Handler(),
			ReadHeaderTimeout: orDefaultDuration(s.cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       orDefaultDuration(s.cfg.IdleTimeout, DefaultIdleTimeout),
			MaxHeaderBytes:    orDefault(s.cfg.MaxHeaderBytes, DefaultMaxHeaderBytes),
		}
	}
	return s.listenSide()
}

// GRPCAddr returns the address gRPC listens on ("" when disabled).
func (s *Server) GRPCAddr() string { return addr(s.grpcLis) }

// HTTPAddr returns the address HTTP listens on ("" when disabled).
func (s *Server) HTTPAddr() string { return addr(s.httpLis) }

func addr(l net.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

// Registry returns the registry the server's metrics are on.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Rules returns the rules in force.
func (s *Server) Rules() *config.Config { return s.rules.Load().cfg }

// Reload checks the rules files now (as the periodic poll does) and reports whether new
// rules were applied; an invalid change is an error and the previous rules stay.
func (s *Server) Reload() (bool, error) {
	if s.watcher == nil {
		return false, errors.New("server: reload: the rules are static (no RulesPath)")
	}
	return s.watcher.Reload()
}

// Serve answers requests until ctx is done, then shuts down gracefully: health turns
// NOT_SERVING, listeners close, in-flight requests finish (up to ShutdownTimeout), and the
// store it opened is closed (flushing decorators). It returns the first serving error.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 2)
	if s.grpc != nil {
		s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		s.health.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
		s.health.SetServingStatus(rlqs.ServiceName, healthpb.HealthCheckResponse_SERVING)
		s.health.SetServingStatus(PeerHealthService, healthpb.HealthCheckResponse_SERVING)
		go func() { errc <- s.grpc.Serve(s.grpcLis) }()
	}
	if s.http != nil {
		go func() {
			if err := s.http.Serve(s.httpLis); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
				return
			}
			errc <- nil
		}()
	}
	s.serveSide()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if s.watcher != nil && s.cfg.ReloadInterval >= 0 {
		go s.watcher.Run(watchCtx, s.cfg.ReloadInterval)
	}
	s.ready.Store(true)
	if s.grpc != nil || s.http != nil { // else embedded (sluice proxy), which says what it serves
		s.log.Info("sluice serving", "grpc", s.GRPCAddr(), "http", s.HTTPAddr(), "debug", s.DebugAddr(), "metrics", s.MetricsAddr(),
			"domains", s.Rules().Domains())
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		if err != nil {
			s.log.Error("server failed", "err", err)
		}
	}
	s.shutdown()
	return err
}

// shutdown stops accepting, lets in-flight requests finish and releases resources.
func (s *Server) shutdown() {
	s.ready.Store(false)
	s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	if s.grpc != nil {
		s.health.Shutdown()
		s.quota.Drain() // quota streams never end by themselves
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{})
			go func() { s.grpc.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				s.grpc.Stop()
			}
		}()
	}
	if s.http != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.http.Shutdown(ctx); err != nil {
				_ = s.http.Close()
			}
		}()
	}
	wg.Wait()
	s.Close()
}

// Close releases what New acquired (listeners, the store it opened) without a graceful
// shutdown. Serve calls it; it is safe to call more than once.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.grpc != nil {
			s.grpc.Stop()
		}
		if s.http != nil {
			_ = s.http.Close()
		}
		s.closeSide()
		for _, l := range []net.Listener{s.grpcLis, s.httpLis} {
			if l != nil {
				_ = l.Close() // not yet served, or already closed
			}
		}
		if s.storeCloser != nil {
			err = s.storeCloser.Close()
		}
		if s.localStore != nil {
			_ = s.localStore.Close()
		}
	})
	return err
}

// Run builds a Server from cfg and serves until ctx is done (see New and Serve).
func Run(ctx context.Context, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}

type rlsService struct {
	rlsv3.UnimplementedRateLimitServiceServer
	s *Server
}

// ShouldRateLimit implements the Envoy RLS v3 API.
func (r rlsService) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	start := time.Now()
	resp, err := r.s.decide(ctx, req)
	took := time.Since(start).Seconds()
	r.s.metrics.grpcLatency.Observe(took)
	r.s.peer.grpcRequests.Inc()
	r.s.peer.grpcTime.Observe(took)
	if err != nil && isInvalid(err) {
		r.s.metrics.grpcInvalid.Inc()
		r.s.peer.serviceError.Inc()
	}
	return resp, err
}
