package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// What envoyproxy/ratelimit users rely on beyond the RLS call itself: its health check, its
// debug endpoint, its metrics listener, and the logging of unknown domains. The differences
// that remain are listed in docs/OPERATIONS.md, "Differences from envoyproxy/ratelimit".

// PeerHealthService is the gRPC health service name envoyproxy/ratelimit reports; the server
// reports it next to "" and the RLS service's full name.
const PeerHealthService = "ratelimit"

// DefaultResponseHeaderNames are the names of the ResponseHeaders: limit, remaining, reset.
var DefaultResponseHeaderNames = [3]string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"}

// handleHealthcheck is envoyproxy/ratelimit's GET /healthcheck: 200 "OK" while serving; 503
// naming why until the store has answered once (storegate.go: the peer does not even listen
// then); 500 while starting or shutting down, or waiting for the first rules of a rules
// source (unless rls.Config.ReadyWithoutRules, the peer's FORCE_START_WITHOUT_INITIAL_CONFIG);
// with Config.HealthcheckStore, also while the store is unreachable.
func (s *Server) handleHealthcheck(w http.ResponseWriter, r *http.Request) {
	if why := s.gate.reason(); why != "" {
		http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
		return
	}
	if !s.ready.Load() || !s.eng.RulesReady() || (s.cfg.HealthcheckStore && !s.storeHealthy(r.Context())) {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, "OK")
}

// handleRLConfig is envoyproxy/ratelimit's /rlconfig: one line per limit, in its format.
func (s *Server) handleRLConfig(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, s.Rules().Dump())
}

// sideListener is an extra HTTP listener: Prometheus metrics on their own address
// (Config.MetricsAddr) or the peer's debug endpoints (Config.DebugAddr).
type sideListener struct {
	lis net.Listener
	srv *http.Server
}

// listenSide opens the extra listeners that Config asks for.
func (s *Server) listenSide() error {
	if a := s.cfg.MetricsAddr; a != "" {
		path := s.cfg.MetricsPath
		if path == "" {
			path = "/metrics"
		}
		mux := http.NewServeMux()
		var g prometheus.Gatherer = s.registry
		if s.cfg.MetricsGatherer != nil {
			g = s.cfg.MetricsGatherer
		}
		mux.Handle("GET "+path, promhttp.HandlerFor(g, promhttp.HandlerOpts{Registry: s.registry}))
		if err := s.addSide("metrics-addr", a, mux); err != nil {
			return err
		}
	}
	if a := s.cfg.DebugAddr; a != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /rlconfig", s.handleRLConfig)
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "/rlconfig: print out the currently loaded configuration for debugging\n")
		})
		if err := s.addSide("debug-addr", a, mux); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) addSide(field, addr string, h http.Handler) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("server: %s: %w", field, err)
	}
	s.side = append(s.side, sideListener{lis: lis, srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}})
	return nil
}

// MetricsAddr returns the address of the extra metrics listener ("" without one).
func (s *Server) MetricsAddr() string { return s.sideAddr(s.cfg.MetricsAddr != "", 0) }

// DebugAddr returns the address of the debug listener ("" without one).
func (s *Server) DebugAddr() string {
	i := 0
	if s.cfg.MetricsAddr != "" {
		i = 1
	}
	return s.sideAddr(s.cfg.DebugAddr != "", i)
}

func (s *Server) sideAddr(on bool, i int) string {
	if !on || i >= len(s.side) {
		return ""
	}
	return addr(s.side[i].lis)
}

// serveSide serves the extra listeners until they are closed.
func (s *Server) serveSide() {
	for _, l := range s.side {
		go func() { _ = l.srv.Serve(l.lis) }() // returns when closed
	}
}

// closeSide closes the extra listeners.
func (s *Server) closeSide() {
	for _, l := range s.side {
		_ = l.srv.Close()
		_ = l.lis.Close()
	}
}
