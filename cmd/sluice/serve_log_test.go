package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestServeRoutesRedisClientLogs: under --log-format json, what go-redis has to say about a
// Redis it cannot reach comes out of sluice serve as JSON records (logger=go-redis), at most
// one a second, never as go-redis's own plain-text lines on standard error. sluice serve runs
// in a child process (this test binary), so its real standard error is what is read.
func TestServeRoutesRedisClientLogs(t *testing.T) {
	if args := os.Getenv("SLUICE_TEST_SERVE_ARGS"); args != "" {
		os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := l.Addr().String()
	_ = l.Close() // nothing listens there: every dial fails at once
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeRoutesRedisClientLogs$")
	cmd.Env = append(os.Environ(), "SLUICE_TEST_SERVE_ARGS=serve --log-format json --grpc-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 "+
		"--store-timeout 100ms --store redis://"+deadPort+"/0?dial_timeout=20ms")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		lines   []string
		httpc   = make(chan string, 1)
		scanned = make(chan struct{})
	)
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			lines = append(lines, line)
			mu.Unlock()
			var rec struct{ Msg, HTTP string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "sluice serving" {
				httpc <- rec.HTTP
			}
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var addr string
	select {
	case addr = <-httpc:
	case <-time.After(10 * time.Second):
		t.Fatalf("sluice serve did not start; stderr: %q", lines)
	}
	// Every readiness check writes to the dead Redis and fails, and go-redis has a line about
	// each failed dial: about 1.5 s of them.
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("/readyz on a dead Redis: HTTP %d, want 503", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-scanned
	if err := cmd.Wait(); err != nil {
		t.Errorf("sluice serve: %v", err)
	}
	goRedis := 0
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a line of sluice serve --log-format json is not JSON: %q", line)
			continue
		}
		if rec["logger"] == "go-redis" {
			goRedis++
			if msg, _ := rec["msg"].(string); !strings.Contains(msg, "dial") || rec["level"] != "WARN" {
				t.Errorf("go-redis record: %q, want a WARN about dialing", line)
			}
		}
	}
	t.Logf("%d lines on standard error in %v, %d of them go-redis's", len(lines), elapsed.Round(time.Millisecond), goRedis)
	if most := int(elapsed/time.Second) + 1; goRedis == 0 || goRedis > most {
		t.Errorf("%d go-redis records in %v, want 1 to %d (one a second)", goRedis, elapsed, most)
	}
}
