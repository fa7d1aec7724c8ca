package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// TestHealthcheckFollowsStore: with Config.HealthcheckStore (envoyproxy/ratelimit's
// REDIS_HEALTH_CHECK_ACTIVE_CONNECTION), /healthcheck and the gRPC health services turn
// unhealthy while the store cannot take a write and healthy again once it can; without it,
// they follow the process and its rules only, whatever the store does.
func TestHealthcheckFollowsStore(t *testing.T) {
	for _, follow := range []bool{true, false} {
		mem, err := memory.New(memory.WithSweepInterval(-1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mem.Close() })
		flaky := sluicetest.NewFlakyStore(mem)
		h := start(t, sharedRules, func(c *server.Config) {
			c.Store = flaky
			c.HealthcheckStore = follow
		})
		health := healthpb.NewHealthClient(h.conn)
		status := func() healthpb.HealthCheckResponse_ServingStatus {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: server.PeerHealthService})
			if err != nil {
				t.Fatal(err)
			}
			return r.Status
		}
		healthy := func() bool {
			code, _ := h.get(t, "/healthcheck")
			return code == http.StatusOK && status() == healthpb.HealthCheckResponse_SERVING
		}
		unhealthy := func() bool {
			code, _ := h.get(t, "/healthcheck")
			return code == http.StatusInternalServerError && status() == healthpb.HealthCheckResponse_NOT_SERVING
		}
		testenv.Eventually(t, 10*time.Second, "healthy with the store up", healthy)
		flaky.SetFailing(true)
		if follow {
			testenv.Eventually(t, 10*time.Second, "unhealthy with the store down", unhealthy)
			flaky.SetFailing(false)
			testenv.Eventually(t, 10*time.Second, "healthy again with the store back", healthy)
			continue
		}
		// Not following the store: the readiness probe's one-second memory has passed twice
		// and /healthcheck is still OK (readyz is the store's probe).
		deadline := time.Now().Add(2500 * time.Millisecond)
		for time.Now().Before(deadline) {
			if !healthy() {
				t.Fatal("/healthcheck or gRPC health failed with the store down though HealthcheckStore is off")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if code, _ := h.get(t, "/readyz"); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz with the store down: %d, want 503", code)
		}
	}
}
