package grpclimit_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestDenialDetails: the call past the limit is refused with ResourceExhausted, a RetryInfo
// rounded up to the millisecond, a QuotaFailure naming the limit and key, and the x-ratelimit
// headers, and never reaches the service.
func TestDenialDetails(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	rule := sluice.TokenBucket(3, time.Second, 1) // one token every 333.33 ms
	in := mustNew(t, newMemory(t, clock), every(grpclimit.Limit{Name: "calls", Rule: rule, Key: grpclimit.KeyMethod()}),
		grpclimit.WithHeaderStyle(grpclimit.HeadersX))
	s := serve(t, in, nil)

	ok := s.check(t, "")
	if ok.code != codes.OK {
		t.Fatalf("first call: %v %s", ok.code, ok.msg)
	}
	for name, want := range map[string]string{"x-ratelimit-limit": "1", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "1"} {
		if got := ok.headerValue(t, name); got != want {
			t.Errorf("allowed call: %s = %s, want %s", name, got, want)
		}
	}

	clock.Advance(time.Millisecond) // 332.33 ms to the next token
	r := s.check(t, "")
	if r.code != codes.ResourceExhausted {
		t.Fatalf("second call: %v %s, want ResourceExhausted", r.code, r.msg)
	}
	if r.retry == nil || r.retry.GetRetryDelay().AsDuration() != 333*time.Millisecond {
		t.Errorf("RetryInfo %v, want retry_delay 333ms (332.33 ms rounded up)", r.retry)
	}
	if r.quota == nil || len(r.quota.Violations) != 1 {
		t.Fatalf("QuotaFailure %v, want one violation", r.quota)
	}
	v := r.quota.Violations[0]
	if v.Subject != hashedSubject("calls:"+checkMethod) || v.QuotaId != "calls" || v.QuotaValue != 1 || !strings.Contains(v.Description, rule.String()) {
		t.Errorf("violation %+v, want subject calls:%s, quota_id calls, quota_value 1, the rule in the description", v, checkMethod)
	}
	if got := r.headerValue(t, "x-ratelimit-remaining"); got != "0" {
		t.Errorf("denied call: x-ratelimit-remaining = %s, want 0", got)
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d calls reached the service, want 1", n)
	}
	if st := in.Stats(); st.Allowed != 1 || st.Denied != 1 || st.StoreErrors != 0 || st.Invalid != 0 {
		t.Errorf("stats %+v, want 1 allowed, 1 denied", st)
	}

	clock.Advance(333 * time.Millisecond) // exactly the retry delay
	if r := s.check(t, ""); r.code != codes.OK {
		t.Errorf("call after the retry delay: %v %s", r.code, r.msg)
	}
}

// TestNeverRetry: a call whose cost exceeds the capacity is refused saying so, with a
// RetryInfo of the period (the state is empty) rather than none, so that a client that
// retries on ResourceExhausted does not retry at once (issue 30).
func TestNeverRetry(t *testing.T) {
	in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), every(grpclimit.Limit{Name: "calls", Rule: sluice.PerMinute(2)}),
		grpclimit.WithCost(func(context.Context, string, any) int64 { return 3 }))
	r := serve(t, in, nil).check(t, "")
	if r.code != codes.ResourceExhausted || r.retry == nil || r.retry.GetRetryDelay().AsDuration() != time.Minute ||
		r.quota == nil || !strings.Contains(r.msg, "costs more than the limit's capacity") {
		t.Errorf("got %v %q retry %v quota %v, want ResourceExhausted saying so, with a QuotaFailure and a RetryInfo of 1m", r.code, r.msg, r.retry, r.quota)
	}
}

// TestRedis: the same limits over Redis: the budget is exact and the details come through.
func TestRedis(t *testing.T) {
	l := newRedis(t, testenv.RedisAddr(t))
	name := uniqueName(t)
	in := mustNew(t, l, every(grpclimit.Limit{Name: name, Rule: sluice.FixedWindow(3, time.Minute), Key: grpclimit.KeyMetadata("x-api-key")}))
	s := serve(t, in, nil)
	for i := range 3 {
		if r := s.check(t, "", "x-api-key", "alice"); r.code != codes.OK {
			t.Fatalf("call %d: %v %s", i, r.code, r.msg)
		}
	}
	r := s.check(t, "", "x-api-key", "alice")
	if r.code != codes.ResourceExhausted || r.retry == nil || r.quota == nil {
		t.Fatalf("fourth call: %v %s retry %v quota %v", r.code, r.msg, r.retry, r.quota)
	}
	if d := r.retry.GetRetryDelay().AsDuration(); d <= 0 || d > time.Minute || d%time.Millisecond != 0 {
		t.Errorf("retry_delay %v, want a whole number of ms in (0, 1m]", d)
	}
	if got := r.quota.Violations[0].Subject; got != hashedSubject(name+":alice") {
		t.Errorf("subject %q, want %s:alice", got, name)
	}
	if r := s.check(t, "", "x-api-key", "bob"); r.code != codes.OK {
		t.Errorf("bob, another key: %v %s", r.code, r.msg)
	}
}

// TestMetadataKeys: each API key has its own budget; a call without the key is not limited by
// that limit (here a second, global limit still applies to it).
func TestMetadataKeys(t *testing.T) {
	l := newMemory(t, sluicetest.NewManualClock(t0))
	in := mustNew(t, l, every(
		grpclimit.Limit{Name: "per-key", Rule: sluice.PerMinute(1), Key: grpclimit.KeyMetadata("X-Api-Key")},
		grpclimit.Limit{Name: "global", Rule: sluice.PerMinute(4)},
	))
	s := serve(t, in, nil)
	steps := []struct {
		key  string
		want codes.Code
	}{{"alice", codes.OK}, {"alice", codes.ResourceExhausted}, {"bob", codes.OK}, {"", codes.OK}, {"", codes.OK}, {"", codes.ResourceExhausted}}
	for i, st := range steps {
		var md []string
		if st.key != "" {
			md = []string{"x-api-key", st.key}
		}
		r := s.check(t, "", md...)
		if r.code != st.want {
			t.Fatalf("step %d (key %q): %v %s, want %v", i, st.key, r.code, r.msg, st.want)
		}
		if r.code == codes.ResourceExhausted && st.key == "" && r.quota.Violations[0].QuotaId != "global" {
			t.Errorf("step %d: violation %v, want the global limit", i, r.quota.Violations)
		}
	}
}

// TestLayered: a call refused by one limit consumes from none (AllowAll), and the
// QuotaFailure names only the limit that refused it.
func TestLayered(t *testing.T) {
	l := newMemory(t, sluicetest.NewManualClock(t0))
	wide := grpclimit.Limit{Name: "wide", Rule: sluice.PerMinute(10), Key: grpclimit.KeyMethod()}
	narrow := grpclimit.Limit{Name: "narrow", Rule: sluice.PerMinute(1), Key: grpclimit.KeyMetadata("tenant")}
	s := serve(t, mustNew(t, l, every(wide, narrow)), nil)
	if r := s.check(t, "", "tenant", "a"); r.code != codes.OK {
		t.Fatalf("first: %v %s", r.code, r.msg)
	}
	for range 3 {
		r := s.check(t, "", "tenant", "a")
		if r.code != codes.ResourceExhausted || len(r.quota.GetViolations()) != 1 || r.quota.Violations[0].QuotaId != "narrow" {
			t.Fatalf("refused call: %v %s %v, want ResourceExhausted naming only narrow", r.code, r.msg, r.quota)
		}
	}
	d, err := l.Peek(context.Background(), "wide:"+checkMethod, wide.Rule)
	if err != nil || d.Remaining != 9 {
		t.Errorf("wide limit after 1 admitted and 3 refused calls: remaining %d (%v), want 9", d.Remaining, err)
	}
}

// TestRoutes: the most specific route applies: the method's own, then its service's, then the
// default; a route without limits exempts its calls.
func TestRoutes(t *testing.T) {
	l := newMemory(t, sluicetest.NewManualClock(t0))
	in := mustNew(t, l, []grpclimit.Route{
		{Method: "", Limits: []grpclimit.Limit{{Name: "default", Rule: sluice.PerMinute(1)}}},
		{Method: "/grpc.health.v1.Health/", Limits: []grpclimit.Limit{{Name: "health", Rule: sluice.PerMinute(2)}}},
		{Method: checkMethod}, // exempt
	})
	s := serve(t, in, nil)
	for i := range 5 {
		if r := s.check(t, ""); r.code != codes.OK {
			t.Fatalf("exempt Check %d: %v %s", i, r.code, r.msg)
		}
	}
	// Watch falls to the service route: 2 streams pass, the third is refused.
	for i, want := range []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted} {
		r := s.watch(t)
		if r.code != want {
			t.Fatalf("Watch %d: %v %s, want %v", i, r.code, r.msg, want)
		}
		if want != codes.OK && r.quota.Violations[0].QuotaId != "health" {
			t.Errorf("Watch refused by %v, want the service route's limit", r.quota.Violations)
		}
	}
}

// watch opens a Watch stream and reads its first message: a stream the interceptor refuses
// fails there, with the status details.
func (s *server) watch(t *testing.T) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := s.client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return replyOf(t, err)
	}
	_, err = stream.Recv()
	r := replyOf(t, err)
	r.header, _ = stream.Header()
	return r
}

// TestStream: a refused stream carries the same details and headers as a unary call.
func TestStream(t *testing.T) {
	in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), every(grpclimit.Limit{Name: "streams", Rule: sluice.PerMinute(1), Key: grpclimit.KeyMethod()}),
		grpclimit.WithHeaderStyle(grpclimit.HeadersX))
	s := serve(t, in, nil)
	if r := s.watch(t); r.code != codes.OK || r.headerValue(t, "x-ratelimit-remaining") != "0" {
		t.Fatalf("first stream: %v %s headers %v", r.code, r.msg, r.header)
	}
	r := s.watch(t)
	if r.code != codes.ResourceExhausted || r.retry == nil || r.quota.GetViolations()[0].Subject != hashedSubject("streams:"+watchMethod) {
		t.Fatalf("second stream: %v %s retry %v quota %v", r.code, r.msg, r.retry, r.quota)
	}
	if got := r.headerValue(t, "x-ratelimit-remaining"); got != "0" {
		t.Errorf("refused stream: x-ratelimit-remaining %s, want 0", got)
	}
	// The sliding window of 1 a minute, taken at the start of a window, frees its unit when
	// that window has fully slid out: two minutes later.
	if d := r.retry.GetRetryDelay().AsDuration(); d != 2*time.Minute {
		t.Errorf("retry_delay %v, want 2m", d)
	}
}

// TestCost: the cost function's n is charged; one that panics or returns less than 1 is
// logged and counted, and the call costs 1 (never a refund, never free).
func TestCost(t *testing.T) {
	var logs testenv.LogBuffer
	clock := sluicetest.NewManualClock(t0)
	l := newMemory(t, clock)
	cost := func(_ context.Context, _ string, req any) int64 {
		switch req.(*healthpb.HealthCheckRequest).GetService() {
		case "batch":
			return 3
		case "refund":
			return -5
		case "panic":
			panic("cost function bug")
		}
		return 1
	}
	in := mustNew(t, l, every(grpclimit.Limit{Name: "units", Rule: sluice.FixedWindow(10, time.Minute)}),
		grpclimit.WithCost(cost), grpclimit.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), grpclimit.WithClock(clock),
		grpclimit.WithHeaderStyle(grpclimit.HeadersX))
	s := serve(t, in, nil)
	// health answers NOT_FOUND for an unknown service: the call was admitted and ran.
	steps := []struct {
		service   string
		remaining string
	}{{"batch", "7"}, {"refund", "6"}, {"panic", "5"}, {"", "4"}}
	for _, st := range steps {
		r := s.check(t, st.service)
		if r.code != codes.OK && r.code != codes.NotFound {
			t.Fatalf("%q: %v %s", st.service, r.code, r.msg)
		}
		if got := r.headerValue(t, "x-ratelimit-remaining"); got != st.remaining {
			t.Errorf("after %q: remaining %s, want %s", st.service, got, st.remaining)
		}
	}
	if st := in.Stats(); st.Invalid != 2 || st.Allowed != 4 {
		t.Errorf("stats %+v, want 2 invalid, 4 allowed", st)
	}
	// Both defects are of one kind (the cost function), logged at most once a second: the
	// clock has not moved, so the second line is dropped.
	if recs := logs.Records(t, "grpclimit: cost function"); len(recs) != 1 || recs[0]["level"] != "ERROR" {
		t.Errorf("log records %v, want one error line", recs)
	}
	// A second later the next defect is logged, with the count of lines dropped meanwhile.
	clock.Advance(time.Second)
	s.check(t, "panic")
	if recs := logs.Records(t, "grpclimit: cost function"); len(recs) != 2 || recs[1]["suppressed"] != 1.0 {
		t.Errorf("log records %v, want a second line with suppressed=1", recs)
	}
}

// TestBadInput: an oversized key is refused with InvalidArgument and consumes nothing; a key
// function that panics fails its call with Internal and the server goes on.
func TestBadInput(t *testing.T) {
	l := newMemory(t, sluicetest.NewManualClock(t0))
	boom := func(ctx context.Context, _ string, dst []byte) ([]byte, bool) {
		if len(metadata.ValueFromIncomingContext(ctx, "x-boom")) > 0 {
			panic("key function bug")
		}
		return dst, false
	}
	global := grpclimit.Limit{Name: "global", Rule: sluice.PerMinute(3)}
	in := mustNew(t, l, every(global,
		grpclimit.Limit{Name: "per-key", Rule: sluice.PerMinute(3), Key: grpclimit.KeyMetadata("x-api-key")},
		grpclimit.Limit{Name: "boom", Rule: sluice.PerMinute(3), Key: boom}),
		grpclimit.WithLogger(slog.New(slog.DiscardHandler)))
	s := serve(t, in, nil)

	if r := s.check(t, "", "x-api-key", strings.Repeat("k", 2000)); r.code != codes.InvalidArgument || !strings.Contains(r.msg, "longer than") {
		t.Errorf("oversized key: %v %s, want InvalidArgument", r.code, r.msg)
	}
	if r := s.check(t, "", "x-boom", "1"); r.code != codes.Internal || !strings.Contains(r.msg, `"boom"`) {
		t.Errorf("panicking key function: %v %s, want Internal naming the limit", r.code, r.msg)
	}
	if d, err := l.Peek(context.Background(), "global:", global.Rule); err != nil || d.Remaining != 3 {
		t.Errorf("global budget after two bad calls: %d (%v), want 3 (nothing consumed)", d.Remaining, err)
	}
	if r := s.check(t, "", "x-api-key", "alice"); r.code != codes.OK {
		t.Errorf("good call after bad ones: %v %s", r.code, r.msg)
	}
	if st := in.Stats(); st.Invalid != 2 || st.Allowed != 1 {
		t.Errorf("stats %+v, want 2 invalid, 1 allowed", st)
	}
}

// TestHeaderModes: by default only refusals carry the x-ratelimit metadata; HeadersNone sends
// none.
func TestHeaderModes(t *testing.T) {
	for _, tc := range []struct {
		name             string
		opts             []grpclimit.Option
		allowed, refused bool
	}{
		{"default", nil, false, true},
		{"never", []grpclimit.Option{grpclimit.WithHeaderStyle(grpclimit.HeadersNone)}, false, false},
		{"always", []grpclimit.Option{grpclimit.WithHeaderStyle(grpclimit.HeadersX)}, true, true},
	} {
		in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), every(grpclimit.Limit{Name: "calls", Rule: sluice.PerMinute(1)}), tc.opts...)
		s := serve(t, in, nil)
		for i, want := range []bool{tc.allowed, tc.refused} {
			r := s.check(t, "")
			if got := len(r.header.Get("x-ratelimit-limit")) == 1; got != want {
				t.Errorf("%s, call %d (%v): headers %v, want x-ratelimit-* %v", tc.name, i, r.code, r.header, want)
			}
		}
	}
}
