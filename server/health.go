package server

import (
	"context"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/quota/rlqs"
)

// serveHealth sets the gRPC health of every service the server reports: SERVING, or, while
// the engine waits for the first rules of its rules source (and is not ready without them),
// NOT_SERVING until they arrive, as /healthcheck.
func (s *Server) serveHealth(ctx context.Context) {
	set := func(st healthpb.HealthCheckResponse_ServingStatus) {
		for _, name := range []string{"", rlsv3.RateLimitService_ServiceDesc.ServiceName, rlqs.ServiceName, PeerHealthService} {
			s.health.SetServingStatus(name, st)
		}
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
