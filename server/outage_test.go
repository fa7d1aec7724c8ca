package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
)

// get returns the status and body of GET path.
func (h *harness) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(h.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// metricValue returns the value of the metric line that starts with prefix (-1 if absent).
func (h *harness) metricValue(t *testing.T, prefix string) float64 {
	t.Helper()
	line := h.metric(t, prefix)
	if line == "" {
		return -1
	}
	v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	if err != nil {
		t.Fatalf("metric line %q: %v", line, err)
	}
	return v
}

// waitFor polls cond every 10 ms until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, limit)
		}
	}
}

// TestFallbackOutageLeavesATrace: with each fallback policy, a stalled Redis (SIGSTOP) shows:
// an ERROR line naming the policy and the cause, sluice_store_errors_total rising although
// every decision is answered, sluice_store_state{state="fallback"} 1, /readyz 200 "degraded"
// (503 with ?strict); once Redis continues, an INFO line of the return, the state back to
// store, /readyz "ready", and the time in the fallback in sluice_fallback_seconds_total.
func TestFallbackOutageLeavesATrace(t *testing.T) {
	r := testenv.StartRedis(t)
	for _, policy := range []string{"local", "fail_open", "fail_closed"} {
		t.Run(policy, func(t *testing.T) {
			var logs testenv.LogBuffer
			h := (&harness{}).run(t, server.Config{Config: rls.Config{Rules: compile(t, sharedRules), ReloadInterval: -1, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), StoreConfig: store.Config{Backend: store.Backend{URL: "redis://" + r.Addr() + "/0", Timeout: 200 * time.Millisecond}, Decorators: store.Decorators{Fallback: policy}}}, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
			tenant := "t-" + policy + "-" + randomSuffix()
			state := func(s string) string { return `sluice_store_state{policy="` + policy + `",state="` + s + `"}` }
			h.ask(t, "shared", desc("tenant", tenant))
			if code, body := h.get(t, "/readyz"); code != 200 || body != "ready" {
				t.Fatalf("/readyz with Redis up: %d %q, want 200 ready", code, body)
			}
			if h.metricValue(t, state("store")) != 1 || h.metricValue(t, state("fallback")) != 0 {
				t.Errorf("state metrics with Redis up: %q, %q", h.metric(t, state("store")), h.metric(t, state("fallback")))
			}
			errorsBefore := h.metricValue(t, "sluice_store_errors_total ")

			r.Signal(syscall.SIGSTOP)
			stopped := true
			defer func() {
				if stopped {
					r.Signal(syscall.SIGCONT)
				}
			}()
			waitFor(t, 5*time.Second, "fallback state", func() bool {
				h.ask(t, "shared", desc("tenant", tenant)) // answered whatever the policy
				_, body := h.get(t, "/readyz")
				return strings.HasPrefix(body, "degraded")
			})
			code, body := h.get(t, "/readyz")
			if code != 200 || !strings.Contains(body, "fallback policy "+policy) {
				t.Errorf("/readyz in the fallback: %d %q, want 200 degraded naming the policy", code, body)
			}
			if code, _ := h.get(t, "/readyz?strict"); code != 503 {
				t.Errorf("/readyz?strict in the fallback: %d, want 503", code)
			}
			if got := h.metricValue(t, "sluice_store_errors_total "); got <= errorsBefore {
				t.Errorf("sluice_store_errors_total: %v before the stall, %v in it; want it to rise", errorsBefore, got)
			}
			if h.metricValue(t, state("fallback")) != 1 || h.metricValue(t, state("store")) != 0 {
				t.Errorf("state metrics in the fallback: %q, %q", h.metric(t, state("store")), h.metric(t, state("fallback")))
			}
			recs := logs.Records(t, "store unavailable")
			if len(recs) != 1 || recs[0]["level"] != "ERROR" || recs[0]["policy"] != policy || recs[0]["cause"] == "" {
				t.Errorf("log of the switch to the fallback: %v, want one ERROR with policy %s and a cause", recs, policy)
			}
			if recs := logs.Records(t, "store error"); len(recs) == 0 || recs[0]["answered_by"] != "fallback "+policy {
				t.Errorf("store error log: %v, want one answered by the fallback", recs)
			}

			r.Signal(syscall.SIGCONT)
			stopped = false
			waitFor(t, 5*time.Second, "return to the store", func() bool {
				_, body := h.get(t, "/readyz")
				return body == "ready"
			})
			if recs := logs.Records(t, "store answered a probe"); len(recs) != 1 || recs[0]["policy"] != policy {
				t.Errorf("log of the return to the store: %v, want one naming policy %s", recs, policy)
			}
			if h.metricValue(t, state("store")) != 1 || h.metricValue(t, state("fallback")) != 0 {
				t.Errorf("state metrics after the stall: %q, %q", h.metric(t, state("store")), h.metric(t, state("fallback")))
			}
			for _, to := range []string{"fallback", "store"} {
				if got := h.metricValue(t, `sluice_store_state_changes_total{to="`+to+`"}`); got != 1 {
					t.Errorf("changes to %s: %v, want 1", to, got)
				}
			}
			secs := h.metricValue(t, "sluice_fallback_seconds_total ")
			if secs <= 0 || secs > 10 {
				t.Errorf("sluice_fallback_seconds_total: %v, want the stall's few tenths of a second", secs)
			}
			t.Logf("%s: %v s in the fallback, %v store errors counted", policy, secs,
				h.metricValue(t, "sluice_store_errors_total ")-errorsBefore)
		})
	}
}

// TestReadyzRefusesAStoreThatRefusesWrites: without a fallback, /readyz is 503 while Redis
// answers reads but refuses every write (out of memory under maxmemory noeviction, its own
// redis-server), as every decision then fails; ready again once memory is freed.
func TestReadyzRefusesAStoreThatRefusesWrites(t *testing.T) {
	r := testenv.StartRedis(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	h := (&harness{}).run(t, server.Config{Config: rls.Config{Rules: compile(t, sharedRules), ReloadInterval: -1, StoreConfig: store.Config{Backend: store.Backend{URL: "redis://" + r.Addr() + "/0", Timeout: 5 * time.Second}}}, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"})
	ctx := context.Background()
	admin := goredis.NewClient(&goredis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer admin.Close()
	r.FillUntilOOM(t)
	if err := admin.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis out of memory does not answer a ping: %v", err)
	}
	if code, body := h.get(t, "/readyz"); code != 503 || !strings.Contains(body, "OOM") {
		t.Errorf("/readyz while Redis refuses writes: %d %q, want 503 naming OOM", code, body)
	}
	// SYNC: Valkey (lazyfree-lazy-user-flush yes by default) frees a plain FLUSHALL's memory
	// in the background, after the reply.
	if err := admin.Do(ctx, "flushall", "sync").Err(); err != nil {
		t.Fatal(err)
	}
	if code, body := h.get(t, "/readyz"); code != 200 || body != "ready" {
		t.Errorf("/readyz after freeing memory: %d %q, want 200 ready", code, body)
	}
}
