package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
)

// StoreSpan is the name of a store call's span.
const StoreSpan = "sluice.store.Take"

// Store returns st deciding in a child span of the caller's span (StoreSpan) for each call
// made within a recorded span; a call without one (the readiness probe, an unsampled trace)
// goes straight to st. redact turns a store key into what the span may show (the rls
// engine's keys carry descriptor values: API keys, addresses). Only Take is wrapped: give it
// the store an engine decides on, not one whose optional interfaces a decorator needs.
func Store(st sluice.Store, t trace.Tracer, redact func(key string) string) sluice.Store {
	return &tracedStore{st: st, t: t, redact: redact}
}

type tracedStore struct {
	st     sluice.Store
	t      trace.Tracer
	redact func(string) string
}

func (s *tracedStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return s.st.Take(ctx, req)
	}
	ctx, span := s.t.Start(ctx, StoreSpan, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("sluice.store.key", s.redact(req.Key)),
		attribute.String("sluice.rule.algorithm", req.Rule.Algorithm.String()),
		attribute.Int64("sluice.rule.limit", req.Rule.Limit),
		attribute.Int64("sluice.request.n", req.N)))
	defer span.End()
	d, err := s.st.Take(ctx, req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return d, err
	}
	span.SetAttributes(attribute.Bool("sluice.decision.allowed", d.Allowed),
		attribute.Int64("sluice.decision.remaining", d.Remaining))
	return d, nil
}
