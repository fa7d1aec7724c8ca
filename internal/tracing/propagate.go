package tracing

import (
	"context"

	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc/metadata"
)

// Propagator reads (and writes) the trace context as Envoy sends it on its calls to the rate
// limit service: W3C traceparent/tracestate (Envoy's OpenTelemetry tracer), B3 in single or
// multiple headers (its Zipkin tracer), and W3C baggage. Written, it sends traceparent and
// B3's multiple headers.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{}, propagation.Baggage{},
		b3.New(b3.WithInjectEncoding(b3.B3MultipleHeader)))
}

// ExtractIncoming returns ctx carrying the trace context of the incoming gRPC metadata of
// ctx, as p reads it (ctx itself when it carries none).
func ExtractIncoming(ctx context.Context, p propagation.TextMapPropagator) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	return p.Extract(ctx, mdCarrier(md))
}

// mdCarrier reads gRPC metadata (lower-case keys) as a propagation carrier.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
