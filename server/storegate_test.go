package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
)

// TestNotReadyUntilStoreAnswers (issue 30 item 3): a server whose Redis has never answered is
// not ready — /healthcheck and /readyz 503 naming the store (its password masked) and the
// error, every gRPC health service NOT_SERVING — and says why in a log line every few seconds;
// once Redis answers, it is ready within a probe (a second), says so, and follows the rules as
// before. A server over the memory store, or with a fallback, is ready at once.
func TestNotReadyUntilStoreAnswers(t *testing.T) {
	testenv.Timing(t) // two log lines 5 s apart; ready within seconds of Redis starting
	rs := testenv.StartRedis(t, "--user", "sluice", "on", ">s3cret", "~*", "&*", "+@all")
	rs.Kill()
	var logs testenv.LogBuffer
	url := "redis://sluice:s3cret@" + rs.Addr() + "/0"
	h := (&harness{}).run(t, server.Config{Config: rls.Config{Rules: compile(t, sharedRules), ReloadInterval: -1,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), StoreConfig: store.Config{Backend: store.Backend{URL: url, Timeout: 200 * time.Millisecond}}},
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
	health := healthpb.NewHealthClient(h.conn)
	masked := "redis://sluice:xxxxx@" + rs.Addr() + "/0"
	for _, path := range []string{"/healthcheck", "/readyz"} {
		code, body := h.get(t, path)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, masked) || !strings.Contains(body, "refused") || strings.Contains(body, "s3cret") {
			t.Errorf("%s before Redis answered: %d %q, want 503 naming %s and the error, not the password", path, code, body, masked)
		}
	}
	for _, svc := range []string{"", server.PeerHealthService, "envoy.service.ratelimit.v3.RateLimitService"} {
		if st := healthStatus(t, health, svc); st != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("gRPC health %q before Redis answered: %v, want NOT_SERVING", svc, st)
		}
	}
	testenv.Eventually(t, 15*time.Second, "a second 'store unreachable' line", func() bool {
		return len(logs.Records(t, "store unreachable")) >= 2
	})
	for _, rec := range logs.Records(t, "store unreachable") {
		if rec["store"] != masked || !strings.Contains(rec["err"].(string), "refused") || rec["level"] != "WARN" {
			t.Errorf("log line %v: want WARN naming %s and the error", rec, masked)
		}
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Error("the password in the log")
	}

	started := rs.Start()
	took := testenv.Eventually(t, 10*time.Second, "ready once Redis answers", func() bool {
		code, _ := h.get(t, "/healthcheck")
		return code == http.StatusOK && healthStatus(t, health, server.PeerHealthService) == healthpb.HealthCheckResponse_SERVING
	})
	t.Logf("ready %v after the call that found Redis up (Redis started %v before)", took, time.Since(started).Round(time.Millisecond))
	if code, body := h.get(t, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz once Redis answers: %d %q", code, body)
	}
	if len(logs.Records(t, "store answered: ready")) != 1 {
		t.Errorf("no 'store answered: ready' line: %s", logs.String())
	}

	// Ready at once: the memory store, and a Redis nothing answers with a fallback to decide.
	for _, sc := range []store.Config{{}, {Backend: store.Backend{URL: url, Timeout: 200 * time.Millisecond}, Decorators: store.Decorators{Fallback: "local"}}} {
		rs.Kill()
		h := (&harness{}).run(t, server.Config{Config: rls.Config{Rules: compile(t, sharedRules), ReloadInterval: -1, StoreConfig: sc},
			GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
		if code, body := h.get(t, "/healthcheck"); code != http.StatusOK {
			t.Errorf("store %q fallback %q: /healthcheck %d %q, want 200 at once", sc.URL, sc.Fallback, code, body)
		}
		rs.Start()
	}
}

func healthStatus(t *testing.T, c healthpb.HealthClient, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("health %q: %v", service, err)
	}
	return resp.Status
}
