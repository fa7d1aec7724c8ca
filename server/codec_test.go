package server

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestCodecMarshalsAsProto: the codec's generated marshalling of a response (vtprotobuf)
// decodes, with the standard protobuf code, to the same message, small or past the size
// grpc-go pools buffers from, and a message without generated code goes through the
// standard codec.
func TestCodecMarshalsAsProto(t *testing.T) {
	meta, err := structpb.NewStruct(map[string]any{"k": "v", "n": 2.5})
	if err != nil {
		t.Fatal(err)
	}
	status := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OVER_LIMIT,
		CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{Name: "n", RequestsPerUnit: 7, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
		LimitRemaining:     3,
		DurationUntilReset: durationpb.New(1500000000)}
	for name, resp := range map[string]*rlsv3.RateLimitResponse{
		"empty": {},
		"small": {OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status},
			ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "x-ratelimit-limit", Value: "7"}}, DynamicMetadata: meta},
		"large": {OverallCode: rlsv3.RateLimitResponse_OK,
			ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "x-big", Value: strings.Repeat("v", 64<<10)}}},
	} {
		data, err := newRLSCodec().Marshal(resp)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got rlsv3.RateLimitResponse
		buf := data.Materialize()
		data.Free()
		if err := proto.Unmarshal(buf, &got); err != nil || !proto.Equal(&got, resp) {
			t.Errorf("%s: decoded %v (%v), want %v", name, &got, err, resp)
		}
	}
	data, err := newRLSCodec().Marshal(durationpb.New(42)) // no generated marshalling
	if err != nil {
		t.Fatal(err)
	}
	var d durationpb.Duration
	if err := proto.Unmarshal(data.Materialize(), &d); err != nil || d.AsDuration() != 42 {
		t.Errorf("standard codec: %v %v", &d, err)
	}
}
