package server

import (
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/types/known/durationpb"
)

// BenchmarkCodecMarshal is the server's encoding of a typical response (one descriptor's
// status with its limit, remaining and reset) by its codec (grpc-go's protobuf codec:
// protobuf-go's generated fast path), against go-control-plane's generated vtprotobuf code
// (vtproto: a codec that would use it, sized and written without reflection; issue 34, item
// 4). Measured, it saves nothing at this size (the same 3 allocations, the same time within
// noise), so the server keeps the standard codec.
func BenchmarkCodecMarshal(b *testing.B) {
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
		Code:               rlsv3.RateLimitResponse_OK,
		CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 100, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND},
		LimitRemaining:     42,
		DurationUntilReset: durationpb.New(1000000000)}}}
	proto := encoding.GetCodecV2(protocodec.Name)
	for name, marshal := range map[string]func(any) (mem.BufferSlice, error){"codec": newRLSCodec().Marshal, "vtproto": vtMarshal(proto)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				data, err := marshal(resp)
				if err != nil {
					b.Fatal(err)
				}
				data.Free()
			}
		})
	}
}

// vtMarshal returns a codec's Marshal that writes a message with its generated vtprotobuf
// code when it has some (as grpc-go's codec pools buffers past its threshold), and with
// fallback otherwise.
func vtMarshal(fallback encoding.CodecV2) func(any) (mem.BufferSlice, error) {
	type vtMarshaler interface {
		SizeVT() int
		MarshalToSizedBufferVTStrict([]byte) (int, error)
	}
	return func(v any) (mem.BufferSlice, error) {
		m, ok := v.(vtMarshaler)
		if !ok {
			return fallback.Marshal(v)
		}
		size := m.SizeVT()
		if mem.IsBelowBufferPoolingThreshold(size) {
			buf := make([]byte, size)
			if _, err := m.MarshalToSizedBufferVTStrict(buf); err != nil {
				return nil, err
			}
			return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
		}
		pool := mem.DefaultBufferPool()
		buf := pool.Get(size)
		if _, err := m.MarshalToSizedBufferVTStrict((*buf)[:size]); err != nil {
			pool.Put(buf)
			return nil, err
		}
		return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
	}
}
