package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	gostats "github.com/lyft/gostats"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/connlimit"
	"github.com/sluicehq/sluice/internal/gate"
	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server/rlsmetrics"
)

// Defaults of Config's zero values.
const (
	DefaultGRPCAddr        = "127.0.0.1:8081"
	DefaultHTTPAddr        = "127.0.0.1:8080"
	DefaultMaxBodyBytes    = 4 << 20
	DefaultShutdownTimeout = 10 * time.Second
	DefaultStreamWorkers   = 256
	// DefaultReadHeaderTimeout bounds how long an HTTP client may take to send its request
	// headers: a slowloris connection is closed after it.
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConns          = 10_000
)

// The engine's defaults and the values of Config.RequestRules (see package rls), for the
// command line.
const (
	DefaultMaxRequestLogLimit = rls.DefaultMaxRequestLogLimit
	DefaultMaxRequestPeriod   = rls.DefaultMaxRequestPeriod
	DefaultMaxRequestState    = rls.DefaultMaxRequestState
	RequestRulesAny           = rls.RequestRulesAny
	RequestRulesNamed         = rls.RequestRulesNamed
	RequestRulesOff           = rls.RequestRulesOff
)

// Config configures a Server: the descriptor engine it serves (rls.Config: rules, store,
// bounds of requests, modes) and its listeners. The zero value of every field is a
// documented default; a Server needs rules (RulesPath or Rules).
type Config struct {
	// Config configures the engine. Its ReloadInterval applies while Serve runs; its Logger
	// also receives the server's startup and shutdown lines. Its Observer is the server's
	// metrics (one set here is not used).
	rls.Config
	// Registry receives the metrics, the engine's (package rlsmetrics) and the server's;
	// default a new registry of the server's own.
	Registry *prometheus.Registry
	// NearLimitRatio is the share of a limit past which hits count as near_limit in the
	// envoyproxy/ratelimit metrics (default rlsmetrics.DefaultNearLimitRatio).
	NearLimitRatio float64
	// ResponseTimeMilliseconds records ratelimit_service_response_time_seconds in whole
	// milliseconds, same name and buckets, as envoyproxy/ratelimit does with
	// PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS=true. Default: seconds.
	ResponseTimeMilliseconds bool
	// PeerStats, when set, also counts envoyproxy/ratelimit's statsd stats (peerstats.go)
	// in this store, each with PeerStatsTags (the peer's EXTRA_TAGS); the store's sinks
	// send them. Nil: none.
	PeerStats     gostats.Store
	PeerStatsTags map[string]string
	// GRPCAddr is the RLS gRPC listen address (default DefaultGRPCAddr); "-" disables gRPC.
	GRPCAddr string
	// HTTPAddr is the HTTP API, metrics and health listen address (default DefaultHTTPAddr);
	// "-" disables HTTP.
	HTTPAddr string
	// MaxBodyBytes bounds an HTTP body and a gRPC message (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// ResponseHeaders adds RateLimit-Limit, -Remaining and -Reset headers (names:
	// ResponseHeaderNames) to RLS responses (response_headers_to_add), for Envoy to pass to
	// the client: the requests_per_unit, limit_remaining and duration_until_reset (seconds) of
	// the descriptor closest to its limit, as envoyproxy/ratelimit's
	// LIMIT_RESPONSE_HEADERS_ENABLED.
	ResponseHeaders bool
	// ShutdownTimeout bounds the graceful shutdown (default DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// ResponseHeaderNames name the ResponseHeaders: limit, remaining, reset; an empty name
	// keeps its default (DefaultResponseHeaderNames).
	ResponseHeaderNames [3]string
	// MetricsAddr, when set, also serves the metrics on a listener of its own, at MetricsPath
	// (default /metrics): envoyproxy/ratelimit's PROMETHEUS_ADDR and PROMETHEUS_PATH.
	MetricsAddr, MetricsPath string
	// MetricsGatherer, when set, is what the MetricsAddr listener serves instead of the
	// engine's registry (the series of a statsd_exporter mapping file, internal/peerstats).
	MetricsGatherer prometheus.Gatherer
	// ResponseDynamicMetadata adds the request and the metadata of the limits it passed to
	// each RLS response's dynamic_metadata (dynmeta.go), as envoyproxy/ratelimit's
	// RESPONSE_DYNAMIC_METADATA.
	ResponseDynamicMetadata bool
	// Until a shared store the engine opened without a fallback has answered once, the server
	// is not ready, whatever HealthcheckStore says (storegate.go).
	//
	// HealthcheckStore makes /healthcheck and the gRPC health services follow the store too:
	// unhealthy while it cannot take a write (rls.Engine.Ready) or a fallback decides for it,
	// as envoyproxy/ratelimit's REDIS_HEALTH_CHECK_ACTIVE_CONNECTION (health.go). Off, they
	// follow the process and its rules only, and /readyz is the store's probe.
	HealthcheckStore bool
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
	// GRPCTLS, when set, serves the gRPC port over TLS, or mutual TLS with a client CA
	// (tls.go); nil is plain text.
	GRPCTLS *ServerTLS
	// TracerProvider, when set, traces RLS calls, their store calls and RLQS reports
	// (tracing.go); nil: no tracing, at no cost. Propagator reads the caller's trace context
	// from a call's metadata (default: W3C traceparent and B3, as Envoy sends them).
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	// TrustedProxies are the gateways and proxies (CIDRs or addresses) whose forwarded client
	// addresses the forward-auth and ext_authz doors believe (gateways.go), as sluice proxy's
	// --trusted-proxies; empty: the client is the peer that asks. The rules' max_in_flight
	// limits are enforced by the doors when rls.Config.InFlight is set, each slot held until
	// the gateway releases it or its lease ends.
	TrustedProxies []string
	// GatewayHeaders selects the rate-limit headers of the doors' answers (default
	// httplimit.HeadersBoth: the IETF draft's RateLimit and RateLimit-Policy, and
	// X-RateLimit-*).
	GatewayHeaders httplimit.HeaderStyle
}

// Server is a running rate-limit service: the descriptor engine (package rls) mounted on
// gRPC (RLS, and RLQS from package quota/rlqs) and HTTP listeners. Build it with New, run it
// with Serve.
type Server struct {
	cfg        Config
	log        *slog.Logger
	eng        *rls.Engine
	registry   *prometheus.Registry
	rlsMetrics *rlsmetrics.Metrics // the engine's series (its Observer)
	metrics    *metrics
	current    atomic.Pointer[currentLimits] // response.go

	grpcLis, httpLis net.Listener
	grpc             *grpc.Server
	grpcCreds        grpc.ServerOption // TLS (tls.go); nil for plain text
	health           *health.Server
	http             *http.Server
	ready            atomic.Bool
	gate             *storeGate // storegate.go
	quota            *rlqs.Service
	quotaMetrics     *quotaMetrics // quotametrics.go
	closeOnce        sync.Once

	// envoyproxy/ratelimit compatibility (peer.go)
	side        []sideListener
	headerNames [3]string

	tracer     trace.Tracer // nil: tracing off (tracing.go)
	propagator propagation.TextMapPropagator

	// the gateways' doors (gateways.go)
	doors          *gate.Gate
	held           *heldSlots
	gatewayMetrics *gatewayMetrics
}

// New validates cfg, builds the engine (loading the rules, opening the store) and listens on
// the addresses. Call Serve to answer requests, or Close to release what New acquired.
func New(cfg Config) (*Server, error) {
	s := &Server{cfg: cfg, headerNames: cfg.ResponseHeaderNames}
	for i, n := range s.headerNames {
		if n == "" {
			s.headerNames[i] = DefaultResponseHeaderNames[i]
		}
	}
	if s.cfg.MaxBodyBytes <= 0 {
		s.cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if s.cfg.ShutdownTimeout <= 0 {
		s.cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	s.setupTracing()
	if err := s.newMetrics(); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	s.cfg.Observer = s.rlsMetrics
	eng, err := rls.New(s.cfg.Config)
	if err != nil {
		return nil, err
	}
	s.eng, s.log = eng, eng.Logger()
	s.gate = newStoreGate(&s.cfg)
	if err := s.rlsMetrics.Attach(eng); err != nil {
		_ = eng.Close()
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	if s.grpcCreds, err = cfg.GRPCTLS.grpcCreds(s.log, s.registry); err != nil {
		_ = eng.Close()
		return nil, err
	}
	if err := s.newGate(); err != nil {
		_ = eng.Close()
		return nil, err
	}
	if err := s.listen(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// newMetrics registers the engine's series (package rlsmetrics, with the peer's statsd stats
// when Config.PeerStats is set), the transports' and the quota service's.
func (s *Server) newMetrics() error {
	s.registry = s.cfg.Registry
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	o := rlsmetrics.Options{NearLimitRatio: s.cfg.NearLimitRatio, ResponseTimeMilliseconds: s.cfg.ResponseTimeMilliseconds}
	if st := newPeerStats(s.cfg.PeerStats, s.cfg.PeerStatsTags); st != nil {
		o.Peer = st
	}
	var err error
	if s.rlsMetrics, err = rlsmetrics.New(s.registry, o); err != nil {
		return err
	}
	if s.metrics, err = newMetrics(s.registry); err != nil {
		return err
	}
	s.quotaMetrics, err = newQuotaMetrics(s.registry, s)
	return err
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

func (s *Server) listen() error {
	grpcAddr, httpAddr := s.cfg.GRPCAddr, s.cfg.HTTPAddr
	if grpcAddr == "" {
		grpcAddr = DefaultGRPCAddr
	}
	if httpAddr == "" {
		httpAddr = DefaultHTTPAddr
	}
	if grpcAddr != "-" {
		lis, err := listenAddr(grpcAddr)
		if err != nil {
			return fmt.Errorf("server: grpc-addr: %w", err)
		}
		s.grpcLis = lis
		s.grpc = grpc.NewServer(s.grpcOptions()...)
		s.grpc.RegisterService(&rlsServiceDesc, rlsService{s: s})
		authv3.RegisterAuthorizationServer(s.grpc, authzService{s: s})
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
			lis = connlimit.Listener(lis, orDefault(s.cfg.MaxConns, DefaultMaxConns), nil)
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

// Engine returns the descriptor engine the server serves.
func (s *Server) Engine() *rls.Engine { return s.eng }

// Rules returns the rules in force.
func (s *Server) Rules() *config.Config { return s.eng.Rules() }

// Reload checks the rules files now (as the periodic poll does) and reports whether new
// rules were applied; an invalid change is an error and the previous rules stay.
func (s *Server) Reload() (bool, error) { return s.eng.Reload() }

// Serve answers requests until ctx is done, then shuts down gracefully: health turns
// NOT_SERVING, listeners close, in-flight requests finish (up to ShutdownTimeout), and the
// store it opened is closed (flushing decorators). It returns the first serving error.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 2)
	if since := time.Now(); !s.gate.probe(ctx, s.eng.ProbeStore, s.log, since) {
		go s.gate.run(ctx, s.eng.ProbeStore, s.log, since) // not ready until the store answers
	}
	if s.grpc != nil {
		s.serveHealth(ctx) // health.go
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
	go s.eng.Run(watchCtx)
	s.ready.Store(true)
	if s.grpc != nil || s.http != nil {
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
		s.held.close()
		if s.doors != nil {
			_ = s.doors.Close()
		}
		for _, l := range []net.Listener{s.grpcLis, s.httpLis} {
			if l != nil {
				_ = l.Close() // not yet served, or already closed
			}
		}
		err = s.eng.Close()
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
	var traced func(*rlsv3.RateLimitResponse, error)
	if r.s.tracer != nil {
		ctx, traced = r.s.traceDecide(ctx, req)
	}
	resp, err := r.s.decide(ctx, req)
	if traced != nil {
		traced(resp, err)
	}
	took := time.Since(start)
	r.s.metrics.grpcLatency.Observe(took.Seconds())
	invalid := err != nil && isInvalid(err)
	r.s.rlsMetrics.ObserveShouldRateLimit(took, invalid)
	if invalid {
		r.s.metrics.grpcInvalid.Inc()
	}
	return resp, err
}
