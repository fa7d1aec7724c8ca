package server

import (
	"sync"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// rlsCodec is the gRPC codec of the server (set with grpc.ForceServerCodecV2, so it
// applies to this server only and never replaces the codec registered for the process).
// It is the standard protobuf codec, except that a RateLimitRequest that does not decode
// is not an error here: grpc-go would answer INTERNAL before any handler runs. Instead
// the request is left empty and the error kept in malformed, keyed by the request, for
// ShouldRateLimit to answer INVALID_ARGUMENT with the decoding error.
type rlsCodec struct {
	proto     encoding.CodecV2
	malformed *sync.Map // *rlsv3.RateLimitRequest -> error
}

func newRLSCodec(malformed *sync.Map) rlsCodec {
	return rlsCodec{proto: encoding.GetCodecV2(protocodec.Name), malformed: malformed}
}

func (c rlsCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c rlsCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.proto.Unmarshal(data, v)
	if req, ok := v.(*rlsv3.RateLimitRequest); ok && err != nil {
		proto.Reset(req)
		c.malformed.Store(req, err)
		return nil
	}
	return err
}

// Name is the content subtype of the standard codec: clients see no difference.
func (rlsCodec) Name() string { return protocodec.Name }

// takeMalformed returns (and forgets) the decoding error of req, if its bytes did not
// decode. Only an empty request can carry one, so a valid request costs no lookup.
func (s *Server) takeMalformed(req *rlsv3.RateLimitRequest) error {
	if req.Domain != "" || len(req.Descriptors) != 0 {
		return nil
	}
	v, ok := s.malformed.LoadAndDelete(req)
	if !ok {
		return nil
	}
	return invalid("request: not a valid RateLimitRequest protobuf: %v", v)
}
