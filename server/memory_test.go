package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// heapInUse is HeapInuse after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestMemoryFlatUnderBadInput floods the server (gRPC and HTTP) with the largest bad
// requests it must refuse — 10k descriptors, 1 MB values, 1 MB keys — in a bounded loop
// and checks that the heap in use after GC does not grow with the number of requests:
// nothing of a refused request is kept. The margin is generous (the client lives in this
// process too); keeping even one of the 1 MB values per round would exceed it.
func TestMemoryFlatUnderBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("flood")
	}
	h := start(t, goldenRules)
	many := make([]*rlcommon.RateLimitDescriptor, 10_000)
	for i := range many {
		many[i] = desc("remote_address", fmt.Sprint(i))
	}
	mb := strings.Repeat("v", 1<<20)
	bad := []*rlsv3.RateLimitRequest{
		{Domain: "golden", Descriptors: many},
		{Domain: "golden", Descriptors: []*rlcommon.RateLimitDescriptor{desc("remote_address", mb)}},
		{Domain: "golden", Descriptors: []*rlcommon.RateLimitDescriptor{desc(mb, "x")}},
	}
	bodies := make([][]byte, len(bad))
	for i, rq := range bad {
		b, err := protojson.Marshal(rq)
		if err != nil {
			t.Fatal(err)
		}
		bodies[i] = b
	}
	flood := func(rounds int) {
		for range rounds {
			for i, rq := range bad {
				if _, err := h.client.ShouldRateLimit(context.Background(), rq); status.Code(err) != codes.InvalidArgument {
					t.Fatalf("gRPC bad request %d: %v", i, err)
				}
				resp, err := http.Post(h.base+"/json", "application/json", bytes.NewReader(bodies[i]))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest {
					t.Fatalf("HTTP bad request %d: %d", i, resp.StatusCode)
				}
			}
		}
	}
	flood(3) // warm up pools and connections
	before := heapInUse()
	const rounds = 20 // 120 refused requests, about 65 MB of bad input
	flood(rounds)
	after := heapInUse()
	growth := int64(after) - int64(before)
	t.Logf("HeapInuse after GC: %.1f MB before, %.1f MB after %d rounds (%+.1f MB)",
		float64(before)/(1<<20), float64(after)/(1<<20), rounds, float64(growth)/(1<<20))
	const margin = 16 << 20
	if growth > margin {
		t.Errorf("heap in use grew by %.1f MB over %d rounds of bad input (margin %d MB)", float64(growth)/(1<<20), rounds, margin>>20)
	}
	if n := h.store.Calls(); n != 0 {
		t.Errorf("%d store calls for invalid requests", n)
	}
}
