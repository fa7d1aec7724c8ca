package rlqs

import (
	"context"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// ReportSpan is the name of the span of one usage report (Config.Tracer).
const ReportSpan = "sluice.rlqs.Report"

// handleTraced is handle in a span of its own (ReportSpan), a child of the stream's trace
// context (the caller's, as the server read it from the stream's metadata). Its attributes
// are the domain and counts, never a bucket id's values.
func (st *stream) handleTraced(ctx context.Context, msg *rlqspb.RateLimitQuotaUsageReports) (*reply, error) {
	ctx, span := st.svc.tracer.Start(ctx, ReportSpan, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.Int("rlqs.buckets", len(msg.GetBucketQuotaUsages()))))
	defer span.End()
	rep, err := st.handle(ctx, msg)
	span.SetAttributes(attribute.String("rlqs.domain", st.domain))
	if err != nil {
		span.SetStatus(otelcodes.Error, err.Error())
		return rep, err
	}
	span.SetAttributes(attribute.Int("rlqs.actions", rep.actions()))
	return rep, nil
}
