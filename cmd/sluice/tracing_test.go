package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

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
	// Each span is exported when it ends, the RPC's last: wait for all three.
	rcv.WaitSpans(rlsv3.RateLimitService_ShouldRateLimit_FullMethodName[1:], 10*time.Second)
	rcv.WaitSpans(server.DecideSpan, 10*time.Second)
	spans := rcv.WaitSpans(tracing.StoreSpan, 10*time.Second)
	var rpc, decide, store *otlptest.Span
	for i := range spans {
		switch sp := &spans[i]; {
		case sp.ParentSpanID == spanID && sp.TraceID == traceID:
			rpc = sp
		case sp.Name == server.DecideSpan:
			decide = sp
		case sp.Name == tracing.StoreSpan:
			store = sp
		}
	}
	if rpc == nil || decide == nil || store == nil || decide.ParentSpanID != rpc.SpanID || store.ParentSpanID != decide.SpanID {
		t.Fatalf("spans %+v: want the RPC span under the caller's, the decision under it and the store call under that", spans)
	}
	if r := rpc.Resource; r["service.name"] != "RateLimit" || r["service.namespace"] != "gateway" || r["service.instance.id"] != "pod-1" {
		t.Errorf("resource %v", r)
	}
	if rcv.Received([]byte("203.0.113.9")) {
		t.Error("the descriptor's raw value reached the collector")
	}
}

// TestServeStoreTLS: sluice serve decides on a Redis that accepts only TLS with client
// certificates, given the store TLS flags (from their SLUICE_STORE_TLS_* variables), and keeps
// its RLQS quota state there too (--quota-store, same TLS settings).
func TestServeStoreTLS(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	srv := testenv.StartRedisTLS(t, files, "")
	env := append(os.Environ(), "SLUICE_STORE_TLS=true", "SLUICE_STORE_TLS_CA="+files.CA,
		"SLUICE_STORE_TLS_CERT="+files.ClientCert, "SLUICE_STORE_TLS_KEY="+files.ClientKey)
	s := startServe(t, env, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json",
		"--store", "redis://"+srv.Addr(), "--store-timeout", "5s", // a TLS handshake on a loaded machine
		"--quota-store", "redis://"+srv.Addr(), "--config", rulesDir(t))
	req := &rlsv3.RateLimitRequest{Domain: "example", Descriptors: []*rlcommon.RateLimitDescriptor{
		{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "198.51.100.7"}}}}}
	resp := s.ask(t, "grpc", req)
	if resp.OverallCode != rlsv3.RateLimitResponse_OK || len(resp.Statuses) != 1 || resp.Statuses[0].CurrentLimit == nil {
		t.Fatalf("answer %v, want OK under a limit", resp)
	}
	if code, body := s.get(t, s.httpAddr, "/readyz"); code != 200 {
		t.Fatalf("/readyz %d %s: the store over TLS is not ready", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := rlqspb.NewRateLimitQuotaServiceClient(s.conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "example", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId: &rlqspb.BucketId{Bucket: map[string]string{"name": "api"}}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 5}}}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Recv()
	if err != nil {
		t.Fatalf("RLQS over a quota store reached by TLS: %v", err)
	}
	if n := got.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket().GetTokensPerFill().GetValue(); n != 50 {
		t.Fatalf("assignment %v, want the whole limit of 50", got)
	}
	rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), TLSConfig: files.ClientConfig(t)})
	defer rc.Close()
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil || len(keys) < 2 {
		t.Fatalf("keys in the TLS Redis: %v %v, want the decision's and the quota state's", keys, err)
	}
}

// rulesDir writes a rules file with a limit and a quota bucket and returns its directory.
func rulesDir(t *testing.T) string {
	dir := t.TempDir()
	rules := "domain: example\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 10}\n" +
		"quota_buckets:\n  - bucket_id: {name: api}\n    requests_per_unit: 50\n    unit: second\n"
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
