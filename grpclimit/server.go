package grpclimit

import (
	"context"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/rpclimit"
)

// Unary returns the unary server interceptor. A call its rate limits admit then takes a slot
// of each in-flight limit (Limit.InFlight), held until the handler returns. A call its limits refuse is answered with
// codes.ResourceExhausted, without running the handler, and two status details: a
// google.rpc.QuotaFailure with one violation per limit that refused it (subject: the limit's
// name and the key's hash, "name:hash:<12 hex>", as telemetry hashes request values — the key
// may be the caller's API key; quota_id: the limit's name; quota_value: its capacity) and, unless
// the call can never pass (its cost exceeds a capacity), a google.rpc.RetryInfo whose
// retry_delay is how long until it would pass, rounded up to the millisecond, and (see
// WithHeaderStyle) the x-ratelimit-* header metadata. With no limit in any route it passes every
// call through.
func (in *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		limits := in.door.Routes.Match(info.FullMethod)
		if len(limits) == 0 {
			return handler(ctx, req)
		}
		c := in.check(ctx, info.FullMethod, limits, req, 0)
		defer c.end()
		if c.sendHeaders(in.cfg.headers) {
			_ = grpc.SetHeader(ctx, c.header())
		}
		if c.err != nil {
			return nil, c.err
		}
		if s := rpclimit.Settling(ctx, c.q); s != nil {
			defer s.End()
			return handler(s, req)
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor: a stream is checked once, when it opens
// (the cost function sees a nil request), and one its limits refuse ends with
// codes.ResourceExhausted before the handler runs. A stream holds the slots of its in-flight
// limits until it ends. Headers as for Unary.
func (in *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		limits := in.door.Routes.Match(info.FullMethod)
		if len(limits) == 0 {
			return handler(srv, ss)
		}
		c := in.check(ss.Context(), info.FullMethod, limits, nil, 0)
		defer c.end() // the stream holds its slots until it ends
		if c.sendHeaders(in.cfg.headers) {
			_ = ss.SetHeader(c.header())
		}
		if c.err != nil {
			return c.err
		}
		if s := rpclimit.Settling(ss.Context(), c.q); s != nil {
			defer s.End()
			return handler(srv, &settledStream{ServerStream: ss, ctx: s})
		}
		return handler(srv, ss)
	}
}
