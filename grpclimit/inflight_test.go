package grpclimit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/sluicetest"
)

// Issue 24 item 2: a stream holds its in-flight slot until it ends. Two Health.Watch streams
// open hold the limit of 2; a third is refused with ResourceExhausted, a QuotaFailure naming
// the limit and a RetryInfo of at most a second; once a stream ends, a new one is admitted.
func TestInFlightStream(t *testing.T) {
	l := newMemory(t, sluicetest.NewManualClock(t0))
	in := mustNew(t, l, []grpclimit.Route{{Method: watchMethod, Limits: []grpclimit.Limit{{Name: "watchers", InFlight: &sluice.InFlight{Limit: 2}}}}})
	s := serve(t, in, nil)
	open := func() (context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := s.client.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = st.Recv() // the first status: the stream is open past the interceptor
		}
		return cancel, err
	}
	var cancels []context.CancelFunc
	for range 2 {
		cancel, err := open()
		if err != nil {
			t.Fatalf("stream within the limit: %v", err)
		}
		cancels = append(cancels, cancel)
	}
	cancel, err := open()
	cancel()
	r := replyOf(t, err)
	if r.code != codes.ResourceExhausted || r.quota == nil || r.quota.Violations[0].QuotaId != "watchers" || r.quota.Violations[0].QuotaValue != 2 ||
		r.retry == nil || r.retry.RetryDelay.AsDuration() > time.Second || r.retry.RetryDelay.AsDuration() <= 0 {
		t.Fatalf("third stream: %+v", r)
	}
	cancels[0]()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cancel, err := open()
		if err == nil {
			cancel()
			break
		}
		cancel()
		if time.Now().After(deadline) {
			t.Fatalf("no slot 10 s after a stream ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the server sees the cancel asynchronously
	}
	cancels[1]()
}

// A unary call holds its slot until its handler returns; a call over an adaptive limit ends
// with Unavailable.
func TestInFlightUnary(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	l := newMemory(t, clock)
	grad, err := adaptive.NewGradient(adaptive.Settings{Floor: 1, Ceiling: 1, Initial: 1})
	if err != nil {
		t.Fatal(err)
	}
	ls := sluice.NewLeases(l.Store(), sluice.WithClock(clock))
	t.Cleanup(func() { _ = ls.Close() })
	in := mustNew(t, l, every(
		grpclimit.Limit{Name: "per-call", InFlight: &sluice.InFlight{Limit: 1}},
		grpclimit.Limit{Name: "backend", Rule: sluice.PerSecond(1000), InFlight: &sluice.InFlight{}, Adaptive: grad}),
		grpclimit.WithClock(clock), grpclimit.WithLeases(ls))
	info := &grpc.UnaryServerInfo{FullMethod: checkMethod}
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := in.Unary()(context.Background(), nil, info, func(context.Context, any) (any, error) {
			close(entered)
			<-release
			return nil, nil
		})
		done <- err
	}()
	<-entered
	if held := ls.Held(); held != 2 {
		t.Errorf("%d leases held by a call in its handler, want 2", held)
	}
	_, err = in.Unary()(context.Background(), nil, info, func(context.Context, any) (any, error) { return nil, nil })
	if r := replyOf(t, err); r.code != codes.ResourceExhausted || r.quota == nil || r.quota.Violations[0].QuotaId != "per-call" {
		t.Errorf("second call while the first runs: %+v", r)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if held := ls.Held(); held != 0 {
		t.Errorf("%d leases held after the handler returned", held)
	}

	// the adaptive limit of 1 refuses a second concurrent call with Unavailable
	in = mustNew(t, l, every(grpclimit.Limit{Name: "backend", InFlight: &sluice.InFlight{}, Adaptive: grad}))
	_, err = in.Unary()(context.Background(), nil, info, func(ctx context.Context, _ any) (any, error) {
		_, err := in.Unary()(ctx, nil, info, func(context.Context, any) (any, error) { return nil, nil })
		return nil, err
	})
	if r := replyOf(t, err); r.code != codes.Unavailable || !strings.Contains(r.msg, "adaptive") {
		t.Errorf("over the adaptive limit: %+v", r)
	}
}

// Bad in-flight limits are refused naming the field; a store without leases cannot hold them.
func TestInFlightConfig(t *testing.T) {
	l := newMemory(t, sluicetest.NewManualClock(t0))
	for want, lim := range map[string]grpclimit.Limit{
		"in_flight: sluice: invalid rule: max_in_flight": {Name: "a", InFlight: &sluice.InFlight{}},
		"in_flight: sluice: invalid rule: lease":         {Name: "a", InFlight: &sluice.InFlight{Limit: 1, Lease: time.Hour * 1000}},
		".rule:":                                         {Name: "a", Rule: sluice.Rule{Limit: 1}, InFlight: &sluice.InFlight{Limit: 1}},
	} {
		if _, err := grpclimit.New(l, every(lim)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", lim, err, want)
		}
	}
	_, err := grpclimit.New(sluice.New(&sluicetest.Recorder{}), every(grpclimit.Limit{Name: "a", InFlight: &sluice.InFlight{Limit: 1}}))
	if !errors.Is(err, sluice.ErrNoLeaser) {
		t.Errorf("a store without leases: %v", err)
	}
}
