package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/sluicetest"
)

// slowOrTimingOut fails every decision as a store does when its own timeout expires, except
// keys with "slow", which wait for the caller's deadline.
var slowOrTimingOut = sluicetest.TimingOutStore{Hang: func(req sluice.Request) bool { return strings.Contains(req.Key, "slow") }}

// TestStoreTimeoutIsUnavailable: a store that gives up on its own deadline is a store
// failure (UNAVAILABLE, counted), not the caller's DEADLINE_EXCEEDED; the caller's own
// deadline stays DEADLINE_EXCEEDED.
func TestStoreTimeoutIsUnavailable(t *testing.T) {
	h := (&harness{}).run(t, server.Config{Config: rls.Config{Store: slowOrTimingOut, Rules: compile(t, goldenRules), ReloadInterval: -1}, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
	_, err := h.client.ShouldRateLimit(context.Background(), req(desc("remote_address", "x")))
	if status.Code(err) != codes.Unavailable {
		t.Errorf("store timeout: %v, want UNAVAILABLE", err)
	}
	if line := h.metric(t, "sluice_store_errors_total "); !strings.HasSuffix(line, " 1") {
		t.Errorf("store errors metric: %q, want 1", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := h.client.ShouldRateLimit(ctx, req(desc("remote_address", "slow"))); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("caller deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	// The server answers the expired call on its own time: wait until it has (its latency
	// is observed after the error is mapped), then check it was not counted.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if strings.HasSuffix(h.metric(t, `sluice_request_duration_seconds_count{transport="grpc"}`), " 2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never finished the expired call")
		}
	}
	if line := h.metric(t, "sluice_store_errors_total "); !strings.HasSuffix(line, " 1") {
		t.Errorf("store errors metric after the caller's deadline: %q, want still 1", line)
	}
}
