// Package tracing sets Sluice up for OpenTelemetry traces, as envoyproxy/ratelimit does from
// its TRACING_* variables: an SDK tracer provider exporting over OTLP (HTTP by default, or
// gRPC), sampling a share of the traces started here and every trace whose parent was sampled,
// the propagators that read the trace context Envoy sends (W3C traceparent and B3), and a
// store decorator that makes each store call a child span.
//
// With tracing off nothing here is built: the server and the engine check a nil provider once
// per call and record nothing.
package tracing
