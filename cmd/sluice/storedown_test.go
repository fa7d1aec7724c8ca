package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// waitLine waits for a log line of s containing every one of parts.
func waitLine(t *testing.T, s *served, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range s.log() {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return line
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no log line with %q in %q", parts, s.log())
	return ""
}

// TestStoreUnreachableAtStart: serve on a store nothing answers for names the store (its
// password masked) at start, says at once that it is unreachable and not ready until it
// answers (issue 30: /healthcheck 503, not the 200 that sent Kubernetes traffic to a pod that
// decides nothing), serves anyway, and every answer says "store unavailable" once, whatever
// the store and the mode (the property: no error message contains the prefix twice).
func TestStoreUnreachableAtStart(t *testing.T) {
	addr := closedPort(t)
	for _, tc := range []struct{ store, mode string }{
		{"redis://:s3cret@" + addr + "/0", "sync"},
		{"redis://" + addr + "/0", "overlimit"},
		{"redis-cluster://" + addr, "sync"},
		{"redis-sentinel://" + addr + "/mymaster", "sync"},
		{"memcached://" + addr, "sync"},
		{"memcached://" + addr, "overlimit"},
	} {
		t.Run(strings.SplitN(tc.store, ":", 2)[0]+"-"+tc.mode, func(t *testing.T) {
			s := startServe(t, nil, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json",
				"--store", tc.store, "--mode", tc.mode, "--store-timeout", "200ms")
			masked := strings.Replace(tc.store, "s3cret", "xxxxx", 1)
			waitLine(t, s, `"msg":"store"`, `"store":"`+masked+`"`, `"mode":"`+tc.mode+`"`)
			waitLine(t, s, `"level":"WARN"`, "store unreachable: not ready until it answers", `"store":"`+masked+`"`, `"err":`)
			for _, line := range s.log() {
				if strings.Contains(line, "s3cret") {
					t.Errorf("the password in %q", line)
				}
			}
			code, body := s.post(t, "/v1/allow", `{"key":"alice","rule":{"algorithm":"token_bucket","limit":2,"period":"1m"}}`)
			if code != http.StatusServiceUnavailable || strings.Count(body, "store unavailable") != 1 {
				t.Errorf("/v1/allow: %d %q: want 503 saying store unavailable once", code, body)
			}
			_, err := s.client.ShouldRateLimit(context.Background(), rlReq("example", 1, []string{"user", "bob"}))
			if err == nil || strings.Count(err.Error(), "store unavailable") != 1 {
				t.Errorf("RLS: %v: want UNAVAILABLE saying store unavailable once", err)
			}
			for _, path := range []string{"/readyz", "/healthcheck"} {
				if code, body := s.get(t, s.httpAddr, path); code != http.StatusServiceUnavailable || !strings.Contains(body, masked) {
					t.Errorf("%s: %d %q, want 503 naming %s", path, code, body, masked)
				}
			}
		})
	}
}
