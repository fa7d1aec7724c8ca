package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// countingRLS is a real RLS server for the tests: it answers OVER_LIMIT to the hot key and
// OK to the rest, and counts the users asked about.
type countingRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	mu    sync.Mutex
	users map[string]int
}

func (s *countingRLS) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	e := req.GetDescriptors()[0].GetEntries()[0]
	if e.GetKey() == "hot" {
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT}, nil
	}
	s.mu.Lock()
	s.users[e.GetValue()]++
	s.mu.Unlock()
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

func startRLS(t *testing.T) (*countingRLS, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rls := &countingRLS{users: map[string]int{}}
	s := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(s, rls)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return rls, lis.Addr().String()
}

// TestMeasure runs rlsload against a real gRPC server in this process (so -pid is this
// process): requests counted, errors none, the hot key over the limit, users spread.
func TestMeasure(t *testing.T) {
	rls, addr := startRLS(t)
	c, err := parseRunFlags([]string{"-addr", addr, "-contender", "test", "-pid", "1", "-callers", "4", "-users", "50",
		"-warmup", "0s", "-duration", "300ms", "-ready-timeout", "30s"})
	if err != nil {
		t.Fatal(err)
	}
	c.pid = os.Getpid()
	r, err := measure(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests == 0 || r.Errors != 0 || r.OverLimit != 0 || r.ServerCPUus == nil || r.RedisCPUus != nil {
		t.Fatalf("users run: %+v", r)
	}
	if r.Scenario != "4 callers, 50 users" || r.P99us < r.P50us || r.PerSecond <= 0 {
		t.Fatalf("users run: %+v", r)
	}
	rls.mu.Lock()
	asked := len(rls.users)
	rls.mu.Unlock()
	if asked < 1 || asked > 50 {
		t.Errorf("%d requests asked about %d users, want 1 to 50", r.Requests, asked)
	}

	c.users, c.scenario = 0, "hot"
	r, err = measure(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests == 0 || r.OverLimit != r.Requests || r.Errors != 0 {
		t.Fatalf("hot run: %d requests, %d over limit, %d errors", r.Requests, r.OverLimit, r.Errors)
	}
}

// TestRunCmdAppends runs the command twice into one file and reads it back as a table.
func TestRunCmdAppends(t *testing.T) {
	_, addr := startRLS(t)
	out := filepath.Join(t.TempDir(), "runs.jsonl")
	for round := range 2 {
		if err := runCmd([]string{"-addr", addr, "-contender", "floor", "-round", string(rune('1' + round)),
			"-callers", "2", "-users", "10", "-warmup", "0s", "-duration", "100ms", "-out", out}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), b)
	}
	var r Run
	if err := json.Unmarshal([]byte(lines[1]), &r); err != nil || r.Round != 2 || r.Contender != "floor" {
		t.Fatalf("second line %s: %+v, %v", lines[1], r, err)
	}
	var sb strings.Builder
	if err := tableCmd([]string{out}, &sb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "| 2 callers, 10 users | floor | 2 |") {
		t.Fatalf("table:\n%s", sb.String())
	}
}

func TestWaitReadyFails(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	cs, err := dialCallers(addr, workload{domain: "bench", callers: 1, users: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.close()
	if err := cs.waitReady(200 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "no successful call") {
		t.Fatalf("got %v, want no successful call", err)
	}
}

func TestParseRunFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"-contender", "x"}, "-addr is required"},
		{[]string{"-addr", "a:1"}, "-contender is required"},
		{[]string{"-addr", "a:1", "-contender", "x", "-callers", "0"}, "-callers must be at least 1"},
		{[]string{"-addr", "a:1", "-contender", "x", "-users", "-1"}, "-users must be 0"},
		{[]string{"-addr", "a:1", "-contender", "x", "-duration", "0s"}, "-duration must be positive"},
		{[]string{"-addr", "a:1", "-contender", "x", "-flush"}, "-flush needs -redis"},
		{[]string{"-addr", "a:1", "-contender", "x", "extra"}, "unexpected arguments"},
	} {
		_, err := parseRunFlags(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	c, err := parseRunFlags([]string{"-addr", "a:1", "-contender", "x", "-users", "0", "-callers", "64"})
	if err != nil || c.scenario != "64 callers, hot key" || c.duration != 10*time.Second || c.warmup != time.Second {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}

// TestDescriptorGenSpreads: over users consecutive rounds of every caller, each user is asked
// about the same number of times, whatever the callers and users.
func TestDescriptorGenSpreads(t *testing.T) {
	for _, w := range []workload{{callers: 64, users: 10000}, {callers: 1, users: 10000}, {callers: 7, users: 12}, {callers: 12, users: 7}} {
		g := newDescriptorGen(w)
		seen := map[string]int{}
		for i := range w.users {
			for c := range w.callers {
				k, v := g.entry(c, i)
				if k != "user" {
					t.Fatalf("key %q", k)
				}
				seen[v]++
			}
		}
		if len(seen) != w.users {
			t.Fatalf("%+v: %d users asked about, want %d", w, len(seen), w.users)
		}
		for v, n := range seen {
			if n != w.callers {
				t.Fatalf("%+v: user %s asked %d times, want %d", w, v, n, w.callers)
			}
		}
	}
	if k, v := newDescriptorGen(workload{callers: 3}).entry(2, 99); k != "hot" || v != "hot" {
		t.Fatalf("hot workload asked %s=%s", k, v)
	}
}
