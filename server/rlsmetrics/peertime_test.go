package rlsmetrics_test

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/server/rlsmetrics"
)

// TestResponseTimeUnit: ratelimit_service_response_time_seconds is in seconds by default and,
// with ResponseTimeMilliseconds (the peer's PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS), in
// whole milliseconds under the same name, as envoyproxy/ratelimit records it.
func TestResponseTimeUnit(t *testing.T) {
	for _, tc := range []struct {
		ms        bool
		sum       float64
		bucket10s string
	}{
		{false, 1.5007, " 1"}, // 1.5007 s falls below le="10"
		{true, 1500, " 0"},    // 1500 (whole ms) is past every default bucket but +Inf
	} {
		e := prometheus.NewRegistry()
		m, err := rlsmetrics.New(e, rlsmetrics.Options{ResponseTimeMilliseconds: tc.ms})
		if err != nil {
			t.Fatal(err)
		}
		m.ObserveShouldRateLimit(1500*time.Millisecond+700*time.Microsecond, false)
		const name = `ratelimit_service_response_time_seconds`
		line := testenv.MetricLine(t, e, name+`_sum{grpc_method="ShouldRateLimit"}`)
		if sum, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err != nil || math.Abs(sum-tc.sum) > 1e-9 {
			t.Errorf("ms=%v: got %q, want sum %v", tc.ms, line, tc.sum)
		}
		if got := testenv.MetricLine(t, e, name+`_bucket{grpc_method="ShouldRateLimit",le="10"}`); got != name+`_bucket{grpc_method="ShouldRateLimit",le="10"}`+tc.bucket10s {
			t.Errorf("ms=%v: got %q, want le=10 bucket%s", tc.ms, got, tc.bucket10s)
		}
		if got := testenv.MetricLine(t, e, name+`_bucket{grpc_method="ShouldRateLimit",le="+Inf"}`); got == "" || got[len(got)-2:] != " 1" {
			t.Errorf("ms=%v: +Inf bucket %q, want 1", tc.ms, got)
		}
	}
}
