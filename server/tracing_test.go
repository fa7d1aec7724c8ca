package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/tracing/otlptest"
	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/server"
)

const tracingRules = `domain: traced
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 1}
quota_buckets:
  - bucket_id: {name: api}
    requests_per_unit: 100
    unit: second
`

// TestTracing: with a tracer provider, a ShouldRateLimit call carrying Envoy's trace context
// (W3C traceparent, or B3 headers) is an RPC span that is a child of Envoy's span, with a
// DecideSpan child carrying the domain, the descriptor (its value hashed) and the answer, and
// the store call as the DecideSpan's child; an RLQS report is a span, a child of its stream's
// trace context; /json is traced under its headers' context. The descriptor's raw value
// reaches the collector nowhere. A call without a sampled parent is not recorded at sampling
// rate 0.
func TestTracing(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	tp, err := tracing.Start(context.Background(), tracing.Config{ServiceName: "ratelimit", SamplingRate: 0, Endpoint: rcv.URL})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, tracingRules, func(c *server.Config) { c.TracerProvider = tp })
	const secret = "sk-live-4f9a8b7c6d5e"
	const envoyTrace, envoySpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	const b3Trace, b3Span = "80f198ee56343ba864fe8b2a57d3eff7", "e457b5a2e4d86bd1"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ask := func(md metadata.MD, want rlsv3.RateLimitResponse_Code) {
		t.Helper()
		resp, err := h.client.ShouldRateLimit(metadata.NewOutgoingContext(ctx, md),
			&rlsv3.RateLimitRequest{Domain: "traced", Descriptors: []*rlcommon.RateLimitDescriptor{desc("api_key", secret)}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode != want {
			t.Fatalf("answer %v, want %v", resp.OverallCode, want)
		}
	}
	ask(metadata.Pairs("traceparent", "00-"+envoyTrace+"-"+envoySpan+"-01"), rlsv3.RateLimitResponse_OK)
	ask(metadata.Pairs("x-b3-traceid", b3Trace, "x-b3-spanid", b3Span, "x-b3-sampled", "1"), rlsv3.RateLimitResponse_OVER_LIMIT)
	ask(metadata.MD{}, rlsv3.RateLimitResponse_OVER_LIMIT) // no parent, sampling rate 0: not recorded

	// One RLQS report on a stream that carries a trace context.
	const rlqsTrace, rlqsSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	st, err := rlqspb.NewRateLimitQuotaServiceClient(h.conn).StreamRateLimitQuotas(
		metadata.NewOutgoingContext(ctx, metadata.Pairs("traceparent", "00-"+rlqsTrace+"-"+rlqsSpan+"-01")))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "traced", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId: &rlqspb.BucketId{Bucket: map[string]string{"name": "api"}}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 5}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}

	// /json under a traceparent header.
	const jsonTrace, jsonSpan = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
	req, _ := http.NewRequest(http.MethodPost, h.base+"/json", strings.NewReader(`{"domain":"traced","descriptors":[{"entries":[{"key":"api_key","value":"`+secret+`"}]}]}`))
	req.Header.Set("traceparent", "00-"+jsonTrace+"-"+jsonSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("/json: status %d, want 429", resp.StatusCode)
	}

	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := tp.Shutdown(sctx); err != nil { // flushes every span
		t.Fatal(err)
	}
	spans := rcv.Spans()
	byParent := func(name, traceID, parent string) *otlptest.Span {
		for i := range spans {
			if s := &spans[i]; s.Name == name && s.TraceID == traceID && s.ParentSpanID == parent {
				return s
			}
		}
		t.Errorf("no span %q in trace %s with parent %s; got:", name, traceID, parent)
		for _, s := range spans {
			t.Logf("  %s trace %s span %s parent %s %v", s.Name, s.TraceID, s.SpanID, s.ParentSpanID, s.Attributes)
		}
		return &otlptest.Span{}
	}
	for _, c := range []struct {
		trace, parent, code string
	}{{envoyTrace, envoySpan, "OK"}, {b3Trace, b3Span, "OVER_LIMIT"}} {
		rpc := byParent(rlsv3.RateLimitService_ShouldRateLimit_FullMethodName[1:], c.trace, c.parent)
		if rpc.Kind != "SPAN_KIND_SERVER" {
			t.Errorf("RPC span kind %s, want SPAN_KIND_SERVER", rpc.Kind)
		}
		dec := byParent(server.DecideSpan, c.trace, rpc.SpanID)
		if dec.Attributes["ratelimit.domain"] != "traced" || dec.Attributes["ratelimit.overall_code"] != c.code ||
			!strings.HasPrefix(dec.Attributes["ratelimit.descriptor_entries"], "api_key=hash:") {
			t.Errorf("decide span attributes %v", dec.Attributes)
		}
		store := byParent(tracing.StoreSpan, c.trace, dec.SpanID)
		if !strings.HasPrefix(store.Attributes["sluice.store.key"], "hash:") || !strings.Contains(store.Attributes["sluice.store.key"], "|api_key=hash:") {
			t.Errorf("store span attributes %v", store.Attributes)
		}
		if rpc.Resource["service.name"] != "ratelimit" {
			t.Errorf("resource %v", rpc.Resource)
		}
	}
	rep := byParent(rlqs.ReportSpan, rlqsTrace, rlqsSpan)
	if rep.Attributes["rlqs.domain"] != "traced" || rep.Attributes["rlqs.buckets"] != "1" || rep.Attributes["rlqs.actions"] != "1" {
		t.Errorf("report span attributes %v", rep.Attributes)
	}
	jsonDec := byParent(server.DecideSpan, jsonTrace, jsonSpan)
	byParent(tracing.StoreSpan, jsonTrace, jsonDec.SpanID)
	if n := len(spans); n != 3+3+1+2 {
		t.Errorf("%d spans, want 9 (the call without a sampled parent recorded nothing)", n)
	}
	if rcv.Received([]byte(secret)) {
		t.Error("the descriptor's raw value reached the collector")
	}
}
