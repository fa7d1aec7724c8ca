package httplimit

import (
	"encoding/json"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// deadRedis returns a limiter on Redis whose server is gone: one the test started and killed,
// or an address nothing listens on.
func deadRedis(t *testing.T, clock sluice.Clock) map[string]*sluice.Limiter {
	srv := testenv.StartRedis(t)
	killed := openRedis(t, "redis://"+srv.Addr(), clock)
	if _, err := killed.Allow(t.Context(), "warm", sluice.PerSecond(1)); err != nil {
		t.Fatalf("the started redis-server does not answer: %v", err)
	}
	srv.Kill()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return map[string]*sluice.Limiter{"killed": killed, "dead address": openRedis(t, "redis://"+addr, clock)}
}

func TestStoreFailure(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	for name, l := range deadRedis(t, clock) {
		t.Run(name, func(t *testing.T) {
			if _, err := l.Allow(t.Context(), "k", sluice.PerSecond(1)); !sluice.IsUnavailable(err) {
				t.Fatalf("the dead store answers %v, want ErrStoreUnavailable", err)
			}
			policy := WithLimits(Limit{Name: "api", Rule: sluice.FixedWindow(1, time.Hour)},
				Limit{Name: "burst", Rule: sluice.FixedWindow(1, time.Second)})

			t.Run("fail open", func(t *testing.T) {
				var buf testenv.LogBuffer
				stats := &Stats{}
				h := mustNew(t, l, policy, WithStats(stats), WithLogger(logged(&buf)), WithClock(clock))(okHandler)
				if got := statuses(h, 3, "/", nil); !reflect.DeepEqual(got, codes(ok, ok, ok)) {
					t.Errorf("fail open: %v", got)
				}
				if stats.StoreErrors.Load() != 3 || stats.FailedOpen.Load() != 3 {
					t.Errorf("StoreErrors %d, FailedOpen %d; want 3, 3", stats.StoreErrors.Load(), stats.FailedOpen.Load())
				}
				// One record a second, with the count of those held back.
				recs := buf.Records(t, "httplimit: the store could not decide")
				if len(recs) != 1 || recs[0]["failure"] != "fail_open" || recs[0]["level"] != "WARN" {
					t.Fatalf("log records %v", recs)
				}
				clock.Advance(time.Second)
				_ = get(h, "/", nil)
				recs = buf.Records(t, "httplimit: the store could not decide")
				if len(recs) != 2 || recs[1]["suppressed"] != float64(2) {
					t.Errorf("second record %v, want suppressed 2", recs)
				}
			})

			t.Run("fail closed", func(t *testing.T) {
				stats := &Stats{}
				h := mustNew(t, l, policy, WithFailurePolicy(distributed.FailClosed), WithStats(stats))(okHandler)
				rec := get(h, "/", nil)
				var p ProblemDetails
				_ = json.Unmarshal(rec.Body.Bytes(), &p)
				if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" ||
					p.Type != ProblemTemporaryReducedCapacity || !reflect.DeepEqual(p.ViolatedPolicies, []string{"api", "burst"}) {
					t.Errorf("fail closed: %d, Retry-After %q, body %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
				}
				if stats.FailedClosed.Load() != 1 || stats.StoreErrors.Load() != 1 {
					t.Errorf("FailedClosed %d, StoreErrors %d", stats.FailedClosed.Load(), stats.StoreErrors.Load())
				}
			})

			t.Run("local", func(t *testing.T) {
				local := backends[0].open(t, clock)
				stats := &Stats{}
				h := mustNew(t, l, policy, WithLocalLimiter(local), WithStats(stats))(okHandler)
				if got := statuses(h, 2, "/", nil); !reflect.DeepEqual(got, codes(ok, deny)) {
					t.Errorf("local limiter: %v, want 200 429", got)
				}
				if stats.StoreErrors.Load() != 2 || stats.FailedOpen.Load() != 0 || stats.Denied.Load() != 1 {
					t.Errorf("StoreErrors %d, FailedOpen %d, Denied %d", stats.StoreErrors.Load(), stats.FailedOpen.Load(), stats.Denied.Load())
				}
			})
		})
	}
}

func TestLocalWithoutLimiterFailsOpen(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	l := deadRedis(t, clock)["dead address"]
	_, err := New(l, WithLimits(Limit{Name: "a", Rule: sluice.PerSecond(1)}), WithFailurePolicy(distributed.FailLocal))
	if err == nil {
		t.Fatal("FailLocal without WithLocalLimiter accepted")
	}
	h := Middleware(l, WithLimits(Limit{Name: "a", Rule: sluice.PerSecond(1)}), WithFailurePolicy(distributed.FailLocal), WithLogger(quietLogger()))(okHandler)
	if got := statuses(h, 2, "/", nil); !reflect.DeepEqual(got, codes(ok, ok)) {
		t.Errorf("%v", got)
	}
}

// TestOversizedKeyRefused: a key the store refuses (a client's value too long to key by: here
// a store that takes keys of 40 bytes at most, and a 64-byte value) is the client's bad input,
// answered 400 and counted, whatever the failure policy: failing open on it would let a client
// turn a limit off by sending a long value.
func TestOversizedKeyRefused(t *testing.T) {
	st, err := memory.New(memory.WithMaxKeyLength(40))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	l := sluice.New(st)
	long := strings.Repeat("k", 64)
	for _, policy := range []distributed.FailurePolicy{distributed.FailOpen, distributed.FailClosed} {
		stats := &Stats{}
		h := mustNew(t, l, WithFailurePolicy(policy), WithStats(stats), WithLogger(quietLogger()), WithLimits(Limit{Name: "api", Rule: sluice.PerMinute(5),
			Key: KeyFunc(func(r *http.Request) (string, bool) { return r.Header.Get("X-Tenant"), true })}))(okHandler)
		rec := get(h, "/", func(r *http.Request) { r.Header.Set("X-Tenant", long) })
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "longer than") || strings.Contains(rec.Body.String(), long) {
			t.Errorf("%v: %d %s", policy, rec.Code, rec.Body)
		}
		if stats.BadInput.Load() != 1 || stats.StoreErrors.Load() != 0 || stats.FailedOpen.Load() != 0 {
			t.Errorf("%v: BadInput %d, StoreErrors %d, FailedOpen %d", policy, stats.BadInput.Load(), stats.StoreErrors.Load(), stats.FailedOpen.Load())
		}
	}
}
