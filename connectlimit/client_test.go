package connectlimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/connectlimit"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
)

// downstream is one budget for every call a client makes: a token a second.
var downstream = connectlimit.Limit{Name: "downstream", Rule: sluice.TokenBucket(1, time.Second, 1)}

// TestClient: over each protocol, a client's call past its limit fails locally with the same
// refusal a handler sends, never reaching the server; a stream opening too, failing its
// Receive; after the retry delay both pass.
func TestClient(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			clock := sluicetest.NewManualClock(t0)
			client := mustNew(t, newMemory(t, clock), every(downstream), connectlimit.WithClock(clock))
			s := serve(t, nil, tr)
			if _, err := s.ping(t, client); err != nil {
				t.Fatalf("first call: %v", err)
			}
			_, err := s.ping(t, client)
			r := refusalOf(t, err)
			if r.code != connect.CodeResourceExhausted || r.retry.GetRetryDelay().AsDuration() != time.Second || r.quota.GetViolations()[0].QuotaId != "downstream" || r.meta.Get("Retry-After") != "1" {
				t.Fatalf("second call: %v %q retry %v quota %v, want ResourceExhausted, retry in 1s", r.code, r.msg, r.retry, r.quota)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := s.watch(ctx, client); refusalOf(t, err).code != connect.CodeResourceExhausted {
				t.Errorf("stream past the limit: %v, want ResourceExhausted", err)
			}
			if n := s.calls.Load(); n != 1 {
				t.Errorf("%d calls reached the server, want 1", n)
			}
			clock.Advance(time.Second)
			st, err := s.watch(ctx, client)
			if err != nil {
				t.Fatalf("stream after the retry delay: %v", err)
			}
			_ = st.Close()
		})
	}
}

// TestClientWait: with WithWait, a client's call past its limit waits for its slot on the
// clock and then runs; one cancelled while it waits fails with CodeCanceled; one whose slot is
// past its deadline fails at once with the refusal.
func TestClientWait(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	client := mustNew(t, newMemory(t, clock), every(downstream), connectlimit.WithClock(clock), connectlimit.WithWait(5*time.Second))
	s := serve(t, nil, transports[0])
	if _, err := s.ping(t, client); err != nil {
		t.Fatalf("first call: %v", err)
	}
	done := make(chan error, 1)
	call := func(ctx context.Context) {
		_, err := s.pingCtx(ctx, client)
		done <- err
	}
	go call(context.Background())
	testenv.Eventually(t, 10*time.Second, "a call waiting on the clock", func() bool { return clock.Waiters() > 0 })
	clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("waiting call: %v, want it to run once the clock moved 1s", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond) // real time: before the slot
	defer cancel()
	if _, err := s.pingCtx(ctx, client); refusalOf(t, err).code != connect.CodeResourceExhausted {
		t.Errorf("call whose deadline is before its slot: %v, want ResourceExhausted", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	go call(ctx)
	testenv.Eventually(t, 10*time.Second, "a call waiting on the clock", func() bool { return clock.Waiters() > 0 })
	cancel()
	if err := <-done; refusalOf(t, err).code != connect.CodeCanceled {
		t.Errorf("call cancelled while waiting: %v, want Canceled", err)
	}
	if n := s.calls.Load(); n != 2 {
		t.Errorf("%d calls reached the server, want 2", n)
	}
}

// TestInFlightStream: a handler's stream holds its in-flight slot until it ends: with one
// open, a second is refused with ResourceExhausted and a QuotaFailure naming the limit; once
// the first ends, a new one is admitted.
func TestInFlightStream(t *testing.T) {
	for _, tr := range transports[:2] {
		t.Run(tr.name, func(t *testing.T) {
			in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), []connectlimit.Route{
				{Procedure: watchProcedure, Limits: []connectlimit.Limit{{Name: "watchers", InFlight: &sluice.InFlight{Limit: 1}}}}})
			s := serve(t, in, tr)
			s.release = make(chan struct{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			first, err := s.watch(ctx, nil)
			if err != nil {
				t.Fatalf("first stream: %v", err)
			}
			_, err = s.watch(ctx, nil)
			r := refusalOf(t, err)
			if r.code != connect.CodeResourceExhausted || r.quota.GetViolations()[0].QuotaId != "watchers" || r.quota.GetViolations()[0].Subject != "watchers" || r.retry == nil {
				t.Fatalf("second stream: %v %q quota %v retry %v", r.code, r.msg, r.quota, r.retry)
			}
			close(s.release)
			for first.Receive() {
			}
			if err := first.Err(); err != nil {
				t.Fatalf("first stream: %v", err)
			}
			_ = first.Close()
			waitForSlot(t, func() error {
				st, err := s.watch(ctx, nil)
				if err == nil {
					_ = st.Close()
				}
				return err
			})
		})
	}
}

// TestInFlightUnary: a handler's unary call holds its in-flight slot until the handler
// returns: while one runs, a second is refused; once it returned, a new one is admitted.
func TestInFlightUnary(t *testing.T) {
	in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), every(connectlimit.Limit{Name: "callers", InFlight: &sluice.InFlight{Limit: 1}}))
	s := serve(t, in, transports[1])
	s.release = make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := s.ping(t, nil)
		done <- err
	}()
	testenv.Eventually(t, 10*time.Second, "the first call in its handler", func() bool { return s.calls.Load() == 1 })
	_, err := s.ping(t, nil)
	if r := refusalOf(t, err); r.code != connect.CodeResourceExhausted || r.quota.GetViolations()[0].QuotaId != "callers" || r.meta.Get("Retry-After") != "1" {
		t.Fatalf("second call while the first runs: %v %q quota %v Retry-After %q", r.code, r.msg, r.quota, r.meta.Get("Retry-After"))
	}
	close(s.release)
	if err := <-done; err != nil {
		t.Fatalf("first call: %v", err)
	}
	waitForSlot(t, func() error { _, err := s.ping(t, nil); return err })
}

// waitForSlot calls call until it is admitted, failing on any answer but ResourceExhausted
// (the slot given back a moment after the call that held it ended) and after 10 s.
func waitForSlot(t *testing.T, call func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := call()
		if err == nil {
			return
		}
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("no slot after the call that held it ended: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
