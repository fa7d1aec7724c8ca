package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Defaults of Config's zero values.
const (
	// DefaultServiceName is the service.name of the spans (TRACING_SERVICE_NAME).
	DefaultServiceName = "sluice"
	// ProtocolHTTP and ProtocolGRPC are the OTLP transports (TRACING_EXPORTER_PROTOCOL).
	ProtocolHTTP = "http"
	ProtocolGRPC = "grpc"
)

// Config configures tracing. The standard OTEL_EXPORTER_OTLP_* variables (endpoint, headers,
// timeout, certificates, compression, their TRACES_ forms) configure the exporter as the
// OpenTelemetry SDK reads them; OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME add resource
// attributes.
type Config struct {
	// ServiceName, ServiceNamespace and ServiceInstanceID are the resource's service.name
	// (default OTEL_SERVICE_NAME, else DefaultServiceName), service.namespace and
	// service.instance.id (empty: not set, unless OTEL_RESOURCE_ATTRIBUTES sets them).
	ServiceName, ServiceNamespace, ServiceInstanceID string
	// SamplingRate is the share of the traces started here (calls without a sampled parent)
	// that are recorded, in [0, 1]. A call whose parent was sampled (Envoy's traceparent or
	// B3 header says so) is always recorded, one whose parent was not never.
	SamplingRate float64
	// Protocol is the OTLP transport: ProtocolHTTP (OTLP/HTTP protobuf) or ProtocolGRPC.
	// Empty: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL ("grpc",
	// "http/protobuf"), else HTTP, envoyproxy/ratelimit's default.
	Protocol string
	// Endpoint, when set, is the collector's URL (http://host:4318 for HTTP, the path
	// /v1/traces added when it has none; http://host:4317 for gRPC; an http:// URL is plain
	// text), in place of OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string
}

// Validate reports every invalid field of c, each error naming it (tracing sampling rate,
// tracing exporter protocol).
func (c Config) Validate() error {
	var errs []error
	if !(c.SamplingRate >= 0 && c.SamplingRate <= 1) {
		errs = append(errs, fmt.Errorf("tracing: sampling rate: want a share between 0 and 1, got %v", c.SamplingRate))
	}
	if _, err := c.protocol(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// protocol resolves Protocol: the field, then the standard variables, then HTTP.
func (c Config) protocol() (string, error) {
	p, from := c.Protocol, "exporter protocol"
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p != "" {
			break
		}
		p, from = os.Getenv(name), name
	}
	switch strings.ToLower(p) {
	case "", ProtocolHTTP, "http/protobuf":
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", fmt.Errorf("tracing: %s: want http (http/protobuf) or grpc, got %q", from, p)
}

// Provider is a running tracer provider: the spans it records go to the OTLP exporter in
// batches. Shutdown flushes and stops it.
type Provider struct {
	*sdktrace.TracerProvider
}

// Start validates c and builds its tracer provider and exporter. The exporter connects on
// its first export: a collector that is down costs dropped spans, never a refused start.
func Start(ctx context.Context, c Config) (*Provider, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	proto, _ := c.protocol()
	var exp sdktrace.SpanExporter
	var err error
	if proto == ProtocolGRPC {
		var opts []otlptracegrpc.Option
		if c.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(c.Endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		var opts []otlptracehttp.Option
		if c.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(httpTracesURL(c.Endpoint)))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(serviceAttributes(c)...))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SamplingRate))),
	)
	return &Provider{tp}, nil
}

// serviceAttributes are the resource attributes of c's service fields that are set.
func serviceAttributes(c Config) []attribute.KeyValue {
	name := c.ServiceName
	if name == "" {
		name = os.Getenv("OTEL_SERVICE_NAME")
	}
	if name == "" {
		name = DefaultServiceName
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if c.ServiceNamespace != "" {
		attrs = append(attrs, attribute.String("service.namespace", c.ServiceNamespace))
	}
	if c.ServiceInstanceID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", c.ServiceInstanceID))
	}
	return attrs
}

// httpTracesURL adds OTLP/HTTP's /v1/traces to an endpoint URL without a path, as the SDK
// does for OTEL_EXPORTER_OTLP_ENDPOINT (WithEndpointURL takes the URL as it is).
func httpTracesURL(endpoint string) string {
	scheme, rest, ok := strings.Cut(endpoint, "://")
	if ok && !strings.Contains(strings.TrimSuffix(rest, "/"), "/") {
		return scheme + "://" + strings.TrimSuffix(rest, "/") + "/v1/traces"
	}
	return endpoint
}
