package grpclimit_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/redis"
)

// newRedis returns a limiter on a Redis store at addr.
func newRedis(t *testing.T, addr string) *sluice.Limiter {
	t.Helper()
	st, err := redis.NewFromURL("redis://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return sluice.New(st)
}

// uniqueName returns a limit name no other run uses, since the shared Redis keeps state
// between runs.
func uniqueName(t *testing.T) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "grpclimit-test-" + hex.EncodeToString(b)
}

// TestStoreDown: with the store dead, fail open runs the call and fail closed answers
// Unavailable; both count and log the failure, the log line at most once a second.
func TestStoreDown(t *testing.T) {
	redis := testenv.StartRedis(t)
	l := newRedis(t, redis.Addr())
	limit := grpclimit.Limit{Name: uniqueName(t), Rule: sluice.PerMinute(100), Key: grpclimit.KeyMethod()}
	if _, err := l.Allow(context.Background(), "warm-up", limit.Rule); err != nil {
		t.Fatal(err)
	}
	redis.Kill()
	global := grpclimit.Limit{Name: uniqueName(t), Rule: sluice.PerMinute(1000)}
	for _, tc := range []struct {
		policy distributed.FailurePolicy
		limits []grpclimit.Limit
		want   codes.Code
	}{
		{distributed.FailOpen, []grpclimit.Limit{limit}, codes.OK},
		{distributed.FailClosed, []grpclimit.Limit{limit}, codes.Unavailable},
		{distributed.FailOpen, []grpclimit.Limit{global, limit}, codes.OK},
		{distributed.FailClosed, []grpclimit.Limit{global, limit}, codes.Unavailable},
	} {
		t.Run(fmt.Sprintf("%v/%d_limits", tc.policy, len(tc.limits)), func(t *testing.T) {
			var logs testenv.LogBuffer
			in := mustNew(t, l, every(tc.limits...), grpclimit.WithFailurePolicy(tc.policy), grpclimit.WithClock(sluicetest.NewManualClock(t0)),
				grpclimit.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			s := serve(t, in, nil)
			for i := range 3 {
				r := s.check(t, "")
				if r.code != tc.want {
					t.Fatalf("call %d: %v %s, want %v", i, r.code, r.msg, tc.want)
				}
				if len(r.header.Get("x-ratelimit-limit")) != 0 {
					t.Errorf("call %d: headers %v, want none without a decision", i, r.header)
				}
			}
			if st := in.Stats(); st.StoreErrors != 3 || st.Allowed+st.Denied != 0 {
				t.Errorf("stats %+v, want 3 store errors and no decision", st)
			}
			recs := logs.Records(t, "grpclimit: the store could not decide")
			if len(recs) != 1 || recs[0]["failure"] != tc.policy.String() {
				t.Fatalf("log records %v, want one line with the policy", recs)
			}
			if msg, _ := recs[0]["err"].(string); !strings.Contains(msg, "store unavailable") || strings.Contains(msg, "grpclimit-test-") {
				t.Errorf("logged error %q, want the store's error without the key", msg)
			}
			if n := s.calls.Load(); (n == 3) != (tc.want == codes.OK) {
				t.Errorf("%d calls reached the service", n)
			}
		})
	}
}

// TestNewErrors: malformed routes are refused with an error naming the field.
func TestNewErrors(t *testing.T) {
	l := sluice.New(nil)
	ok := grpclimit.Limit{Name: "ok", Rule: sluice.PerMinute(1)}
	for _, tc := range []struct {
		name   string
		routes []grpclimit.Route
		opts   []grpclimit.Option
		want   string
	}{
		{"method without slash", []grpclimit.Route{{Method: "pkg.S/M"}}, nil, "routes[0].method"},
		{"method with two parts", []grpclimit.Route{{Method: "/pkg.S/M/x"}}, nil, "routes[0].method"},
		{"no service", []grpclimit.Route{{Method: "//M"}}, nil, "routes[0].method"},
		{"route twice", []grpclimit.Route{{Method: "/a.S/"}, {Method: "/a.S/"}}, nil, "routes[1].method"},
		{"unnamed limit", every(grpclimit.Limit{Rule: sluice.PerMinute(1)}), nil, "routes[0].limits[0].name"},
		{"colon in name", every(grpclimit.Limit{Name: "a:b", Rule: sluice.PerMinute(1)}), nil, "routes[0].limits[0].name"},
		{"bad rule", every(ok, grpclimit.Limit{Name: "bad", Rule: sluice.PerMinute(0)}), nil, `routes[0].limits[1] ("bad").rule`},
		{"one name two rules", []grpclimit.Route{{Limits: []grpclimit.Limit{ok}}, {Method: "/a.S/", Limits: []grpclimit.Limit{{Name: "ok", Rule: sluice.PerMinute(2)}}}}, nil, "routes[1].limits[0].rule"},
		{"local policy", nil, []grpclimit.Option{grpclimit.WithFailurePolicy(distributed.FailLocal)}, "failure policy"},
		{"negative wait", nil, []grpclimit.Option{grpclimit.WithWait(-1)}, "wait"},
		{"nil logger", nil, []grpclimit.Option{grpclimit.WithLogger(nil)}, "logger"},
	} {
		_, err := grpclimit.New(l, tc.routes, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), "grpclimit: "+tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	if _, err := grpclimit.New(nil, nil); err == nil {
		t.Error("nil limiter accepted")
	}
}
