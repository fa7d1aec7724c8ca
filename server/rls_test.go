package server_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/server"
)

// goldenRules are the engine's golden rules (rls/testdata/golden.yaml, package rls's golden
// decisions).
var goldenRules = func() string {
	b, err := os.ReadFile("../rls/testdata/golden.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// summary renders a response compactly: overall code, then per descriptor
// "CODE remaining/limit per unit[xN] reset".
func summary(r *rlsv3.RateLimitResponse) string {
	var parts []string
	for _, st := range r.Statuses {
		s := st.Code.String()
		if cl := st.CurrentLimit; cl != nil {
			unit := strings.ToLower(cl.Unit.String())
			if cl.UnitMultiplier != nil {
				unit = fmt.Sprintf("%dx%s", cl.UnitMultiplier.Value, unit)
			}
			name := ""
			if cl.Name != "" {
				name = " " + cl.Name
			}
			s += fmt.Sprintf(" %d/%d per %s%s reset %v", st.LimitRemaining, cl.RequestsPerUnit, unit, name, st.DurationUntilReset.AsDuration())
		}
		parts = append(parts, s)
	}
	return r.OverallCode.String() + ": " + strings.Join(parts, "; ")
}

func req(descs ...*rlcommon.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "golden", Descriptors: descs}
}

// TestRLSResponseFields: the RLS response renders the engine's verdicts (the decisions
// themselves are package rls's golden tests): one status per descriptor in order, the code,
// limit_remaining (4294967295 for an unlimited descriptor), duration_until_reset in whole
// seconds, and current_limit: the binding rule's requests per unit, unit, multiplier and
// name, or the descriptor's own limit.
func TestRLSResponseFields(t *testing.T) {
	h := start(t, goldenRules)
	override := desc("remote_address", "o")
	override.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(2)}
	resp := h.ask(t, "golden", desc("path", "/login", "user", "ann"), desc("tiered", "k"), override, desc("static", "x"), desc("nothing", "x"))
	if got, want := summary(resp), "OK: OK 0/1 per hour per_user_login reset 2h0m0s; OK 1/2 per second reset 1m0s; OK 0/1 per 2xminute reset 4m0s; OK; OK"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if st := resp.Statuses[3]; st.LimitRemaining != 4294967295 || st.CurrentLimit != nil || st.DurationUntilReset != nil {
		t.Errorf("unlimited: %v", st)
	}
	resp = h.ask(t, "golden", desc("path", "/login", "user", "ann"))
	if got, want := summary(resp), "OVER_LIMIT: OVER_LIMIT 0/1 per hour per_user_login reset 2h0m0s"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestResponseHeaders(t *testing.T) {
	h := start(t, goldenRules, func(c *server.Config) { c.ResponseHeaders = true })
	resp := h.ask(t, "golden", desc("remote_address", "x"), desc("path", "/login"))
	var got []string
	for _, hv := range resp.ResponseHeadersToAdd {
		got = append(got, hv.Key+": "+hv.Value)
	}
	if want := "RateLimit-Limit: 2, RateLimit-Remaining: 1, RateLimit-Reset: 2"; strings.Join(got, ", ") != want {
		t.Errorf("headers %q, want %q", strings.Join(got, ", "), want)
	}
}

func TestHealthAndGracefulShutdown(t *testing.T) {
	h := start(t, goldenRules)
	hc := grpc_health_v1.NewHealthClient(h.conn)
	resp, err := hc.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{Service: rlsv3.RateLimitService_ServiceDesc.ServiceName})
	if err != nil || resp.Status != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", resp, err)
	}
	addr := h.srv.GRPCAddr()
	h.stop()
	if _, err := h.client.ShouldRateLimit(context.Background(), req(desc("remote_address", "x"))); err == nil {
		t.Errorf("request after shutdown succeeded on %s", addr)
	}
}
