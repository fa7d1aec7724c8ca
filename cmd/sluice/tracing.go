package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/server"
)

// tracingFlags are serve's OpenTelemetry flags (package internal/tracing). The standard
// OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout, certificates, protocol) are
// read by the SDK itself. envoyproxy/ratelimit's variables that map to them (peerenv.go):
//
//	TRACING_ENABLED               --tracing
//	TRACING_SERVICE_NAME          --tracing-service-name (the peer's default: RateLimit)
//	TRACING_SERVICE_NAMESPACE     --tracing-service-namespace
//	TRACING_SERVICE_INSTANCE_ID   --tracing-service-instance-id
//	TRACING_SAMPLING_RATE         --tracing-sampling-rate
//	TRACING_EXPORTER_PROTOCOL     --tracing-exporter-protocol (http or grpc)
type tracingFlags struct {
	enabled             bool
	cfg                 tracing.Config
	enabledErr, rateErr error // variables that did not parse
}

func (f *tracingFlags) register(fs *flag.FlagSet, env envFunc) {
	on := env("tracing", "SLUICE_TRACING", "false")
	enabled, err := strconv.ParseBool(on)
	if err != nil {
		f.enabledErr = fmt.Errorf("--tracing: want true or false, got %q", on)
	}
	fs.BoolVar(&f.enabled, "tracing", enabled, "export OpenTelemetry traces of RLS calls, RLQS reports and store calls over OTLP (collector: --tracing-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT) [SLUICE_TRACING]")
	fs.StringVar(&f.cfg.ServiceName, "tracing-service-name", env("tracing-service-name", "SLUICE_TRACING_SERVICE_NAME", ""), "service.name of the spans (default: OTEL_SERVICE_NAME, else "+tracing.DefaultServiceName+") [SLUICE_TRACING_SERVICE_NAME]")
	fs.StringVar(&f.cfg.ServiceNamespace, "tracing-service-namespace", env("tracing-service-namespace", "SLUICE_TRACING_SERVICE_NAMESPACE", ""), "service.namespace of the spans [SLUICE_TRACING_SERVICE_NAMESPACE]")
	fs.StringVar(&f.cfg.ServiceInstanceID, "tracing-service-instance-id", env("tracing-service-instance-id", "SLUICE_TRACING_SERVICE_INSTANCE_ID", ""), "service.instance.id of the spans [SLUICE_TRACING_SERVICE_INSTANCE_ID]")
	rate := env("tracing-sampling-rate", "SLUICE_TRACING_SAMPLING_RATE", "1")
	r, err := strconv.ParseFloat(rate, 64)
	if err != nil {
		f.rateErr = fmt.Errorf("--tracing-sampling-rate: want a share between 0 and 1, got %q", rate)
		r = 1
	}
	fs.Float64Var(&f.cfg.SamplingRate, "tracing-sampling-rate", r, "share of the traces started here that are recorded, 0 to 1 (a call whose Envoy span was sampled always is) [SLUICE_TRACING_SAMPLING_RATE]")
	fs.StringVar(&f.cfg.Protocol, "tracing-exporter-protocol", env("tracing-exporter-protocol", "SLUICE_TRACING_EXPORTER_PROTOCOL", ""), "OTLP transport: http or grpc (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http) [SLUICE_TRACING_EXPORTER_PROTOCOL]")
	fs.StringVar(&f.cfg.Endpoint, "tracing-endpoint", env("tracing-endpoint", "SLUICE_TRACING_ENDPOINT", ""), "collector URL, e.g. http://otel-collector:4318 (default: OTEL_EXPORTER_OTLP_ENDPOINT, else the SDK's localhost) [SLUICE_TRACING_ENDPOINT]")
}

// check reports the first problem of the tracing flags, naming the flag.
func (f *tracingFlags) check() error {
	switch {
	case f.enabledErr != nil:
		return f.enabledErr
	case !f.enabled:
		return nil
	case f.rateErr != nil:
		return f.rateErr
	case !(f.cfg.SamplingRate >= 0 && f.cfg.SamplingRate <= 1):
		return fmt.Errorf("--tracing-sampling-rate: want a share between 0 and 1, got %v", f.cfg.SamplingRate)
	}
	if err := (tracing.Config{Protocol: f.cfg.Protocol}).Validate(); err != nil {
		return fmt.Errorf("--tracing-exporter-protocol: %w", err)
	}
	return nil
}

// start checks the flags and, with --tracing, starts the tracer provider and sets it on
// cfg; stop flushes the spans not yet exported (for at most 5 s).
func (f *tracingFlags) start(cfg *server.Config) (stop func(), err error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	if !f.enabled {
		return func() {}, nil
	}
	p, err := tracing.Start(context.Background(), f.cfg)
	if err != nil {
		return nil, fmt.Errorf("--tracing: %w", err)
	}
	cfg.TracerProvider = p
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	}, nil
}
