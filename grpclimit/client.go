package grpclimit

import (
	"context"

	"google.golang.org/grpc"
)

// The client interceptors also pass the call's criticality class on (CriticalityMetadata):
// the one set by WithCriticality, or the one the server handling ctx's call received.
//
// UnaryClient returns the unary client interceptor, which limits the calls a client makes
// (to protect a downstream service, or to stay within its quota): a call its limits refuse
// fails locally with the same codes.ResourceExhausted status a server interceptor sends,
// without reaching the network, unless WithWait lets it wait for a slot. With no limit in
// any route it passes every call through.
func (in *Interceptor) UnaryClient() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx = propagate(ctx)
		if limits := in.door.Routes.Match(method); len(limits) > 0 {
			c := in.check(ctx, method, limits, req, in.cfg.wait)
			c.end()
			if c.err != nil {
				return c.err
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// StreamClient returns the stream client interceptor: as UnaryClient, for the opening of a
// stream (the cost function sees a nil request).
func (in *Interceptor) StreamClient() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx = propagate(ctx)
		if limits := in.door.Routes.Match(method); len(limits) > 0 {
			c := in.check(ctx, method, limits, nil, in.cfg.wait)
			c.end()
			if c.err != nil {
				return nil, c.err
			}
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
}
