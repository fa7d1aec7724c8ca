package server_test

import (
	"bytes"
	"encoding/json"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// ownRedis is a redis-server this test started (SLUICE_REDIS_SERVER_BIN) on a free 127.0.0.1
// port, so it can stop, continue or fill it without touching anyone else's; it is killed, by
// its PID, at the end of the test.
type ownRedis struct {
	addr string
	cmd  *exec.Cmd
}

func startOwnRedis(t *testing.T, args ...string) *ownRedis {
	t.Helper()
	bin := testenv.Get(t, "SLUICE_REDIS_SERVER_BIN")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	r := &ownRedis{addr: "127.0.0.1:" + strconv.Itoa(port)}
	r.cmd = exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--daemonize", "no",
		"--loglevel", "warning"}, args...)...)
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGCONT)
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", r.addr, 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start on %s: %v", r.addr, err)
		}
	}
}

// signal sends sig (SIGSTOP, SIGCONT) to the server.
func (r *ownRedis) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to redis-server %d: %v", sig, r.cmd.Process.Pid, err)
	}
}

// logBuffer collects the JSON records of a slog handler; safe for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// find returns the records whose message starts with prefix.
func (b *logBuffer) find(t *testing.T, prefix string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(b.buf.String(), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, rec)
		}
	}
	return out
}
