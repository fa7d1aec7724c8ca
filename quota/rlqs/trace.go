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
func (st *stream) handleTraced(ctx context.Context, msg *rlqspb.RateLimitQuotaUsageReports) (*rlqspb.RateLimitQuotaResponse, error) {
	ctx, span := st.svc.tracer.Start(ctx, ReportSpan, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.Int("rlqs.buckets", len(msg.GetBucketQuotaUsages()))))
	defer span.End()
	resp, err := st.handle(ctx, msg)
	span.SetAttributes(attribute.String("rlqs.domain", st.domain))
	if err != nil {
		span.SetStatus(otelcodes.Error, err.Error())
		return resp, err
	}
	span.SetAttributes(attribute.Int("rlqs.actions", len(resp.BucketAction)))
	return resp, nil
}
