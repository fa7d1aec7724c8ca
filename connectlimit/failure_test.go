package connectlimit_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/connectlimit"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// TestFailurePolicies: with the store failing (sluicetest.FlakyStore), fail open runs the
// call, fail closed answers CodeUnavailable, fail local decides with the local limiter
// (one call an hour here); each counts the failures and logs one line a second, never the
// API key the call was keyed by.
func TestFailurePolicies(t *testing.T) {
	const secret = "sk-live-0123456789"
	for _, tc := range []struct {
		policy distributed.FailurePolicy
		want   []connect.Code // of three calls; 0: OK
	}{
		{distributed.FailOpen, []connect.Code{0, 0, 0}},
		{distributed.FailClosed, []connect.Code{connect.CodeUnavailable, connect.CodeUnavailable, connect.CodeUnavailable}},
		{distributed.FailLocal, []connect.Code{0, connect.CodeResourceExhausted, connect.CodeResourceExhausted}},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			clock := sluicetest.NewManualClock(t0)
			mem, err := memory.New(memory.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = mem.Close() })
			flaky := sluicetest.NewFlakyStore(mem)
			flaky.SetFailing(true)
			var logs testenv.LogBuffer
			in := mustNew(t, sluice.New(flaky, sluice.WithClock(clock)), every(connectlimit.Limit{Name: "per-key", Rule: sluice.FixedWindow(1, time.Hour), Key: connectlimit.KeyHeader("X-API-Key")}),
				connectlimit.WithFailurePolicy(tc.policy), connectlimit.WithLocalLimiter(newMemory(t, clock)), connectlimit.WithClock(clock),
				connectlimit.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			s := serve(t, in, transports[0])
			for i, want := range tc.want {
				_, err := s.ping(t, nil, "X-API-Key", secret)
				if err == nil && want != 0 || err != nil && refusalOf(t, err).code != want {
					t.Fatalf("call %d: %v, want code %v", i, err, want)
				}
				if err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("call %d: the answer %q holds the API key", i, err)
				}
			}
			st := in.Stats()
			if st.StoreErrors.Load() != 3 {
				t.Errorf("store errors %d, want 3", st.StoreErrors.Load())
			}
			if tc.policy == distributed.FailClosed && st.FailedClosed.Load() != 3 || tc.policy == distributed.FailOpen && st.FailedOpen.Load() != 3 {
				t.Errorf("failed open %d, closed %d", st.FailedOpen.Load(), st.FailedClosed.Load())
			}
			recs := logs.Records(t, "connectlimit: the store could not decide")
			if len(recs) != 1 || recs[0]["failure"] != tc.policy.String() {
				t.Errorf("log records %v, want one line naming the policy", recs)
			}
			if strings.Contains(logs.String(), secret) {
				t.Errorf("the logs hold the API key: %s", logs.String())
			}
		})
	}
}

// TestBadInput: a key function that panics refuses the call with CodeInternal; a key the store
// refuses (a header value past the store's longest key) with CodeInvalidArgument, whatever the
// failure policy; a cost function that panics or returns less than 1 costs 1; an unknown
// criticality class is CRITICAL. Each is counted (BadInput) and logged, the handler not run
// for the refused ones, and no answer or log line holds the client's value.
func TestBadInput(t *testing.T) {
	var logs testenv.LogBuffer
	clock := sluicetest.NewManualClock(t0)
	panicky := connectlimit.Limit{Name: "panicky", Rule: sluice.PerMinute(100), Key: func(context.Context, connectlimit.Call, []byte) ([]byte, bool) { panic("key bug") }}
	in := mustNew(t, newMemory(t, clock), []connectlimit.Route{
		{Procedure: pingProcedure, Limits: []connectlimit.Limit{{Name: "per-key", Rule: sluice.FixedWindow(3, time.Hour), Key: connectlimit.KeyHeader("X-API-Key")},
			{Name: "classed", Rule: sluice.TokenBucket(100, time.Second, 100), Shares: &sluice.DefaultShares}}},
		{Procedure: watchProcedure, Limits: []connectlimit.Limit{panicky}},
	}, connectlimit.WithFailurePolicy(distributed.FailOpen), connectlimit.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))), connectlimit.WithClock(clock),
		connectlimit.WithCost(func(_ context.Context, c connectlimit.Call, _ any) int64 {
			switch c.Header.Get("X-Cost") {
			case "panic":
				panic("cost bug")
			case "zero":
				return 0
			}
			return 1
		}))
	s := serve(t, in, transports[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.watch(ctx, nil); refusalOf(t, err).code != connect.CodeInternal || !strings.Contains(err.Error(), `"panicky"`) {
		t.Errorf("panicking key: %v, want Internal naming the limit", err)
	}
	long := "sk-" + strings.Repeat("x", 2000)
	if _, err := s.ping(t, nil, "X-API-Key", long); refusalOf(t, err).code != connect.CodeInvalidArgument || strings.Contains(err.Error(), "xxxxxxxx") {
		t.Errorf("key too long: %v, want InvalidArgument without the value", err)
	}
	for _, kv := range [][]string{{"X-Cost", "panic"}, {"X-Cost", "zero"}, {"X-Criticality", "VERY-IMPORTANT"}} {
		clock.Advance(2 * time.Second) // past the log throttle of each kind of line
		if _, err := s.ping(t, nil, "X-API-Key", "alice", kv[0], kv[1]); err != nil {
			t.Errorf("%s %s: %v, want the call to cost 1 and run", kv[0], kv[1], err)
		}
	}
	if _, err := s.ping(t, nil, "X-API-Key", "alice"); refusalOf(t, err).code != connect.CodeResourceExhausted {
		t.Errorf("a fourth call of alice: %v, want ResourceExhausted (three cost 1 each)", err)
	}
	if n := in.Stats().BadInput.Load(); n != 5 {
		t.Errorf("bad input %d, want 5", n)
	}
	if n := s.calls.Load(); n != 3 {
		t.Errorf("%d calls ran the handler, want 3", n)
	}
	for _, msg := range []string{"connectlimit: key function panicked", "connectlimit: the store refused a key", "connectlimit: cost function panicked",
		"connectlimit: cost function returned less than 1", "connectlimit: unknown criticality class"} {
		if len(logs.Records(t, msg)) != 1 {
			t.Errorf("no log line %q in %s", msg, logs.String())
		}
	}
	if strings.Contains(logs.String(), "xxxxxxxx") || strings.Contains(logs.String(), "VERY-IMPORTANT") {
		t.Errorf("the logs hold a client's value: %s", logs.String())
	}
}
