package main

import (
	"context"
	"os"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/tracing/otlptest"
	"github.com/sluicehq/sluice/server"
)

// TestServeTracing: sluice serve --tracing exports the spans of an RLS call to the collector
// of --tracing-endpoint, as children of the caller's traceparent, with the service name,
// namespace and instance id of the flags (here from their SLUICE_* variables).
func TestServeTracing(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	env := append(os.Environ(), "OTEL_BSP_SCHEDULE_DELAY=20", // export each batch within 20 ms
		"SLUICE_TRACING_SERVICE_NAMESPACE=gateway", "SLUICE_TRACING_SERVICE_INSTANCE_ID=pod-1")
	s := startServe(t, env, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json",
		"--tracing", "--tracing-endpoint", rcv.URL, "--tracing-service-name", "RateLimit", "--tracing-sampling-rate", "0")
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs("traceparent", "00-"+traceID+"-"+spanID+"-01"))
	if _, err := s.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "example", Descriptors: []*rlcommon.RateLimitDescriptor{
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "203.0.113.9"}}}}}); err != nil {
		t.Fatal(err)
	}
	spans := rcv.WaitSpans(server.DecideSpan, 10*time.Second)
	var rpc, decide *otlptest.Span
	for i := range spans {
		switch sp := &spans[i]; {
		case sp.ParentSpanID == spanID && sp.TraceID == traceID:
			rpc = sp
		case sp.Name == server.DecideSpan:
			decide = sp
		}
	}
	if rpc == nil || decide == nil || decide.ParentSpanID != rpc.SpanID {
		t.Fatalf("spans %+v: want the RPC span under the caller's and the decision under it", spans)
	}
	if r := rpc.Resource; r["service.name"] != "RateLimit" || r["service.namespace"] != "gateway" || r["service.instance.id"] != "pod-1" {
		t.Errorf("resource %v", r)
	}
	if rcv.Received([]byte("203.0.113.9")) {
		t.Error("the descriptor's raw value reached the collector")
	}
	if got := rcv.WaitSpans(tracing.StoreSpan, 5*time.Second); got == nil {
		t.Error("no store span")
	}
}

// TestServeStoreTLS: sluice serve decides on a Redis that accepts only TLS with client
// certificates, given the store TLS flags (from their SLUICE_STORE_TLS_* variables).
func TestServeStoreTLS(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	srv := testenv.StartRedisTLS(t, files, "")
	env := append(os.Environ(), "SLUICE_STORE_TLS=true", "SLUICE_STORE_TLS_CA="+files.CA,
		"SLUICE_STORE_TLS_CERT="+files.ClientCert, "SLUICE_STORE_TLS_KEY="+files.ClientKey)
	s := startServe(t, env, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json",
		"--store", "redis://"+srv.Addr())
	req := &rlsv3.RateLimitRequest{Domain: "example", Descriptors: []*rlcommon.RateLimitDescriptor{
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "198.51.100.7"}}}}}
	resp := s.ask(t, "grpc", req)
	if resp.OverallCode != rlsv3.RateLimitResponse_OK || len(resp.Statuses) != 1 || resp.Statuses[0].CurrentLimit == nil {
		t.Fatalf("answer %v, want OK under a limit", resp)
	}
	if code, body := s.get(t, s.httpAddr, "/readyz"); code != 200 {
		t.Fatalf("/readyz %d %s: the store over TLS is not ready", code, body)
	}
}
