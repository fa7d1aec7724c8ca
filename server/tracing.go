package server

import (
	"context"
	"net/http"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/rls"
)

// Tracing (Config.TracerProvider): each ShouldRateLimit call is an RPC server span
// (otelgrpc, a child of the trace context Envoy sent in the call's metadata) with a child
// DecideSpan carrying the domain, the descriptors (values hashed: rls.TraceDescriptor) and the
// answer, whose store calls are child spans in turn (tracing.StoreSpan); each RLQS usage
// report is a span (rlqs.ReportSpan), a child of the trace context of its stream. With no
// TracerProvider none of this is built, and a call costs one nil check.

// DecideSpan is the name of the span of one ShouldRateLimit decision.
const DecideSpan = "sluice.ShouldRateLimit"

// tracerName names the server's tracer (its instrumentation scope).
const tracerName = "github.com/sluicehq/sluice/server"

// setupTracing reads Config.TracerProvider and Config.Propagator, and has the engine trace
// its store calls; it leaves s.tracer nil when tracing is off.
func (s *Server) setupTracing() {
	if s.cfg.TracerProvider == nil {
		return
	}
	s.tracer = s.cfg.TracerProvider.Tracer(tracerName)
	s.propagator = s.cfg.Propagator
	if s.propagator == nil {
		s.propagator = tracing.Propagator()
	}
	storeTracer := s.cfg.TracerProvider.Tracer(tracerName + "/store")
	wrap := s.cfg.WrapStore
	s.cfg.WrapStore = func(st sluice.Store) sluice.Store {
		if wrap != nil {
			st = wrap(st)
		}
		return tracing.Store(st, storeTracer, rls.TraceKey)
	}
}

// tracingOptions are the gRPC server options of tracing (none when it is off): otelgrpc's
// RPC spans for RLS calls, and the trace context of RLQS streams read into their context.
func (s *Server) tracingOptions() []grpc.ServerOption {
	if s.tracer == nil {
		return nil
	}
	h := otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(s.cfg.TracerProvider),
		otelgrpc.WithPropagators(s.propagator),
		otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool {
			return strings.HasPrefix(info.FullMethodName, "/"+rlsServiceDesc.ServiceName+"/")
		}))
	return []grpc.ServerOption{grpc.StatsHandler(h), grpc.ChainStreamInterceptor(s.streamTraceContext)}
}

// streamTraceContext gives an RLQS stream the trace context of its metadata: a stream lives
// for hours, so it gets no span of its own; each report's span is a child of that context.
func (s *Server) streamTraceContext(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !strings.HasPrefix(info.FullMethod, "/"+rlqs.ServiceName+"/") {
		return handler(srv, ss)
	}
	return handler(srv, tracedStream{ServerStream: ss, ctx: tracing.ExtractIncoming(ss.Context(), s.propagator)})
}

type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (t tracedStream) Context() context.Context { return t.ctx }

// traceDecide starts the DecideSpan of req under ctx's span; end records the answer.
func (s *Server) traceDecide(ctx context.Context, req *rlsv3.RateLimitRequest) (context.Context, func(*rlsv3.RateLimitResponse, error)) {
	ctx, span := s.tracer.Start(ctx, DecideSpan, trace.WithAttributes(
		attribute.String("ratelimit.domain", req.GetDomain()),
		attribute.Int("ratelimit.descriptors", len(req.GetDescriptors()))))
	if !span.IsRecording() {
		return ctx, func(*rlsv3.RateLimitResponse, error) { span.End() }
	}
	descs := make([]string, 0, len(req.GetDescriptors()))
	var entries []rls.Entry
	for _, d := range req.GetDescriptors() {
		entries = entries[:0]
		for _, e := range d.GetEntries() {
			entries = append(entries, rls.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		descs = append(descs, rls.TraceDescriptor(entries))
	}
	span.SetAttributes(attribute.StringSlice("ratelimit.descriptor_entries", descs))
	return ctx, func(resp *rlsv3.RateLimitResponse, err error) {
		defer span.End()
		if err != nil {
			st, _ := status.FromError(err)
			span.SetAttributes(attribute.String("rpc.grpc.status", st.Code().String()))
			span.SetStatus(otelcodes.Error, st.Message())
			return
		}
		codes := make([]string, len(resp.GetStatuses()))
		for i, ds := range resp.GetStatuses() {
			codes[i] = ds.GetCode().String()
		}
		span.SetAttributes(attribute.String("ratelimit.overall_code", resp.GetOverallCode().String()),
			attribute.StringSlice("ratelimit.descriptor_codes", codes))
	}
}

// traceJSON is traceDecide for the /json endpoint, under the trace context of the request's
// headers; it returns the request's context and no end function when tracing is off.
func (s *Server) traceJSON(r *http.Request, req *rlsv3.RateLimitRequest) (context.Context, func(*rlsv3.RateLimitResponse, error)) {
	if s.tracer == nil {
		return r.Context(), nil
	}
	return s.traceDecide(s.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)), req)
}
