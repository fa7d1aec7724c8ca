package tracing_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/tracing/otlptest"
	"github.com/sluicehq/sluice/store/memory"
)

// export starts a provider of c, records one root span named name (with a child store call)
// and shuts the provider down, flushing the span to the collector.
func export(t *testing.T, c tracing.Config, name string) {
	t.Helper()
	ctx := context.Background()
	p, err := tracing.Start(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	st := tracing.Store(mem, p.Tracer("test"), func(k string) string { return "redacted(" + k + ")" })
	ctx, span := p.Tracer("test").Start(ctx, name)
	if _, err := st.Take(ctx, sluice.Request{Key: "raw-key", Rule: sluice.FixedWindow(2, time.Minute), N: 1}); err != nil {
		t.Fatal(err)
	}
	span.End()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
}

// TestExportHTTPAndGRPC: spans reach an OTLP collector over HTTP (the default, and
// "http/protobuf" from the standard variable) and over gRPC (the field, or
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc with OTEL_EXPORTER_OTLP_ENDPOINT), with the service's
// resource attributes; a store call within a span is its child, its key redacted.
func TestExportHTTPAndGRPC(t *testing.T) {
	rcv := otlptest.NewReceiver(t)
	base := tracing.Config{ServiceName: "rl", ServiceNamespace: "ns", ServiceInstanceID: "i-1", SamplingRate: 1}

	c := base
	c.Endpoint = rcv.URL
	export(t, c, "over-http")
	c = base
	c.Protocol, c.Endpoint = "grpc", rcv.GRPCURL
	export(t, c, "over-grpc")
	t.Run("from the environment", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.GRPCURL)
		export(t, base, "grpc-from-env")
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
		export(t, base, "http-from-env")
		t.Setenv("OTEL_SERVICE_NAME", "from-env")
		named := base
		named.ServiceName = ""
		export(t, named, "named-from-env")
	})

	spans := rcv.Spans()
	named := 0
	for _, s := range spans {
		if s.Name == "named-from-env" {
			named++
			if s.Resource["service.name"] != "from-env" {
				t.Errorf("OTEL_SERVICE_NAME: resource %v", s.Resource)
			}
		}
	}
	if named != 1 {
		t.Errorf("%d spans named-from-env, want 1", named)
	}
	for _, name := range []string{"over-http", "over-grpc", "grpc-from-env", "http-from-env"} {
		var root *otlptest.Span
		for i := range spans {
			if spans[i].Name == name {
				root = &spans[i]
			}
		}
		if root == nil {
			t.Errorf("span %q did not arrive (got %d spans)", name, len(spans))
			continue
		}
		if root.Resource["service.name"] != "rl" || root.Resource["service.namespace"] != "ns" || root.Resource["service.instance.id"] != "i-1" {
			t.Errorf("span %q: resource %v", name, root.Resource)
		}
		found := false
		for _, s := range spans {
			if s.Name == tracing.StoreSpan && s.ParentSpanID == root.SpanID && s.TraceID == root.TraceID {
				found = true
				if s.Attributes["sluice.store.key"] != "redacted(raw-key)" || s.Attributes["sluice.decision.allowed"] != "true" {
					t.Errorf("store span attributes %v", s.Attributes)
				}
			}
		}
		if !found {
			t.Errorf("span %q has no store child", name)
		}
	}
}

// TestConfigErrors: invalid settings are errors naming the field, before anything starts.
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  tracing.Config
		env  string
		want string
	}{
		{tracing.Config{SamplingRate: 1.5}, "", "tracing: sampling rate"},
		{tracing.Config{SamplingRate: -0.1}, "", "tracing: sampling rate"},
		{tracing.Config{Protocol: "udp"}, "", "tracing: exporter protocol"},
		{tracing.Config{}, "http/json", "tracing: OTEL_EXPORTER_OTLP_PROTOCOL"},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.env)
		if _, err := tracing.Start(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Start(%+v, env %q) = %v, want an error containing %q", c.cfg, c.env, err, c.want)
		}
	}
}

// TestPropagatorReadsEnvoyHeaders: the trace context Envoy sends in a call's metadata is
// read, W3C traceparent and B3 (multiple and single header).
func TestPropagatorReadsEnvoyHeaders(t *testing.T) {
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for name, md := range map[string]metadata.MD{
		"traceparent": metadata.Pairs("traceparent", "00-"+traceID+"-"+spanID+"-01"),
		"b3 multi":    metadata.Pairs("x-b3-traceid", traceID, "x-b3-spanid", spanID, "x-b3-sampled", "1"),
		"b3 single":   metadata.Pairs("b3", traceID+"-"+spanID+"-1"),
	} {
		ctx := tracing.ExtractIncoming(metadata.NewIncomingContext(context.Background(), md), tracing.Propagator())
		sc := trace.SpanContextFromContext(ctx)
		if sc.TraceID().String() != traceID || sc.SpanID().String() != spanID || !sc.IsSampled() || !sc.IsRemote() {
			t.Errorf("%s: read %v", name, sc)
		}
	}
	ctx := tracing.ExtractIncoming(context.Background(), tracing.Propagator())
	if trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("no metadata: a trace context was read")
	}
	var _ propagation.TextMapPropagator = tracing.Propagator()
}
