package server

import (
	"context"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/quota/rlqs"
)

// serveHealth sets the gRPC health of every service the server reports: NOT_SERVING until
// the store has answered once (storegate.go), then SERVING, or, while the engine waits for
// the first rules of its rules source (and is not ready without them), NOT_SERVING until they
// arrive, as /healthcheck.
func (s *Server) serveHealth(ctx context.Context) {
	set := func(st healthpb.HealthCheckResponse_ServingStatus) {
		for _, name := range []string{"", rlsv3.RateLimitService_ServiceDesc.ServiceName, rlqs.ServiceName, PeerHealthService} {
			s.health.SetServingStatus(name, st)
		}
	}
	if !s.gate.isOpen() {
		set(healthpb.HealthCheckResponse_NOT_SERVING)
		go func() {
			select {
			case <-s.gate.opened:
				s.followRules(ctx, set)
			case <-ctx.Done():
			}
		}()
		return
	}
	s.followRules(ctx, set)
}

// followRules sets the gRPC health once the store gate is open: following the store
// (Config.HealthcheckStore), or SERVING once the rules are in.
func (s *Server) followRules(ctx context.Context, set func(healthpb.HealthCheckResponse_ServingStatus)) {
	if s.cfg.HealthcheckStore {
		go s.followStore(ctx, set)
		return
	}
	if s.eng.RulesReady() {
		set(healthpb.HealthCheckResponse_SERVING)
		return
	}
	set(healthpb.HealthCheckResponse_NOT_SERVING)
	go func() {
		select {
		case <-s.eng.RulesIn():
			set(healthpb.HealthCheckResponse_SERVING) // a no-op once shutdown began
		case <-ctx.Done():
		}
	}()
}

// storeHealthyEvery is how often the gRPC health follows the store (Config.HealthcheckStore);
// the engine itself probes the store at most once a second.
const storeHealthyEvery = time.Second

// storeHealthy reports whether the rules are in and the store takes a write itself (no
// fallback deciding in its place).
func (s *Server) storeHealthy(ctx context.Context) bool {
	degraded, err := s.eng.Ready(ctx)
	return err == nil && degraded == ""
}

// followStore sets the gRPC health from storeHealthy now and every storeHealthyEvery until
// ctx ends.
func (s *Server) followStore(ctx context.Context, set func(healthpb.HealthCheckResponse_ServingStatus)) {
	t := time.NewTicker(storeHealthyEvery)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, storeHealthyEvery)
		ok := s.storeHealthy(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if ok {
			set(healthpb.HealthCheckResponse_SERVING)
		} else {
			set(healthpb.HealthCheckResponse_NOT_SERVING)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
