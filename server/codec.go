package server

import (
	"context"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// rlsCall is what a ShouldRateLimit call decodes into: the request, or, when its bytes are not
// a RateLimitRequest, the decoding error (and an empty request). The server answers the error
// with INVALID_ARGUMENT; grpc-go would answer INTERNAL before any handler runs.
type rlsCall struct {
	req       rlsv3.RateLimitRequest
	decodeErr error
}

// rlsCodec is the gRPC codec of the server (set with grpc.ForceServerCodecV2, so it applies
// to this server only and never replaces the codec registered for the process): the standard
// protobuf codec, except that it decodes an rlsCall, keeping the decoding error in it.
type rlsCodec struct{ proto encoding.CodecV2 }

func newRLSCodec() rlsCodec { return rlsCodec{proto: encoding.GetCodecV2(protocodec.Name)} }

func (c rlsCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c rlsCodec) Unmarshal(data mem.BufferSlice, v any) error {
	call, ok := v.(*rlsCall)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	if err := c.proto.Unmarshal(data, &call.req); err != nil {
		call.req.Reset()
		call.decodeErr = err
	}
	return nil
}

// Name is the content subtype of the standard codec: clients see no difference.
func (rlsCodec) Name() string { return protocodec.Name }

// rlsServiceDesc is the RLS service (name, method and proto file as generated, so clients and
// reflection see the same service) with a handler that decodes an rlsCall.
var rlsServiceDesc = grpc.ServiceDesc{
	ServiceName: "envoy.service.ratelimit.v3.RateLimitService",
	HandlerType: (*rlsv3.RateLimitServiceServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: shouldRateLimitHandler}},
	Metadata:    "envoy/service/ratelimit/v3/rls.proto",
}

// shouldRateLimitHandler is the generated handler of ShouldRateLimit, decoding an rlsCall
// instead of a RateLimitRequest: a request that did not decode is answered INVALID_ARGUMENT
// before the interceptors (as grpc-go answers one its codec refuses).
func shouldRateLimitHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	call := new(rlsCall)
	if err := dec(call); err != nil {
		return nil, err
	}
	svc := srv.(rlsService)
	if call.decodeErr != nil {
		svc.s.metrics.grpcInvalid.Inc()
		return nil, invalid("request: not a valid RateLimitRequest protobuf: %v", call.decodeErr)
	}
	if interceptor == nil {
		return svc.ShouldRateLimit(ctx, &call.req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: rlsv3.RateLimitService_ShouldRateLimit_FullMethodName}
	return interceptor(ctx, &call.req, info, func(ctx context.Context, req any) (any, error) {
		return svc.ShouldRateLimit(ctx, req.(*rlsv3.RateLimitRequest))
	})
}
