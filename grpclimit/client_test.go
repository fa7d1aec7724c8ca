package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/sluicetest"
)

// downstream is one budget for every call a client makes: a token a second.
var downstream = grpclimit.Limit{Name: "downstream", Rule: sluice.TokenBucket(1, time.Second, 1)}

// TestClientFail: without WithWait, a call past the client's limit fails locally with the
// status details, and never reaches the server.
func TestClientFail(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	in := mustNew(t, newMemory(t, clock), every(downstream), grpclimit.WithClock(clock))
	s := serve(t, nil, in)
	if r := s.check(t, ""); r.code != codes.OK {
		t.Fatalf("first call: %v %s", r.code, r.msg)
	}
	r := s.check(t, "")
	if r.code != codes.ResourceExhausted || r.retry.GetRetryDelay().AsDuration() != time.Second || r.quota.GetViolations()[0].QuotaId != "downstream" {
		t.Fatalf("second call: %v %s retry %v quota %v, want ResourceExhausted, retry in 1s", r.code, r.msg, r.retry, r.quota)
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d calls reached the server, want 1", n)
	}
	// A stream opening is limited the same way.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.client.Watch(ctx, &healthpb.HealthCheckRequest{}); replyOf(t, err).code != codes.ResourceExhausted {
		t.Errorf("stream past the limit: %v, want ResourceExhausted", err)
	}
	clock.Advance(time.Second)
	stream, err := s.client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		t.Errorf("stream after the retry delay: %v", err)
	}
}

// TestClientWait: with WithWait, a call past the limit waits for its slot and then runs; one
// that could not get a slot before its deadline fails at once; one cancelled while waiting
// fails with Canceled.
func TestClientWait(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	in := mustNew(t, newMemory(t, clock), every(downstream), grpclimit.WithClock(clock), grpclimit.WithWait(5*time.Second))
	s := serve(t, nil, in)
	if r := s.check(t, ""); r.code != codes.OK {
		t.Fatalf("first call: %v %s", r.code, r.msg)
	}

	done := make(chan error, 1)
	call := func(ctx context.Context) {
		_, err := s.client.Check(ctx, &healthpb.HealthCheckRequest{})
		done <- err
	}
	go call(context.Background())
	waitForWaiter(t, clock)
	clock.Advance(time.Second)
	if r := replyOf(t, <-done); r.code != codes.OK {
		t.Fatalf("waiting call: %v %s, want OK after the clock moved 1s", r.code, r.msg)
	}
	if n := s.calls.Load(); n != 2 {
		t.Errorf("%d calls reached the server, want 2", n)
	}

	// The slot is 1 s away, the deadline 200 ms (real time): no wait, a local refusal.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if r := s.checkCtx(t, ctx, ""); r.code != codes.ResourceExhausted || r.retry == nil {
		t.Errorf("call whose deadline is before its slot: %v %s, want ResourceExhausted with RetryInfo", r.code, r.msg)
	}

	ctx, cancel = context.WithCancel(context.Background())
	go call(ctx)
	waitForWaiter(t, clock)
	cancel()
	if r := replyOf(t, <-done); r.code != codes.Canceled {
		t.Errorf("call cancelled while waiting: %v %s, want Canceled", r.code, r.msg)
	}
	if n := s.calls.Load(); n != 2 {
		t.Errorf("%d calls reached the server, want 2", n)
	}
}

// waitForWaiter returns once a goroutine waits on clock.
func waitForWaiter(t *testing.T, clock *sluicetest.ManualClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clock.Waiters() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no call waits on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}
