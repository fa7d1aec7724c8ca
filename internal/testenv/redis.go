package testenv

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server a test started itself (SLUICE_REDIS_SERVER_BIN) on a free
// 127.0.0.1 port, so that it can kill, stop and restart it, by its PID, without touching the
// servers other tests share. The test's cleanup kills it.
type RedisServer struct {
	t    testing.TB
	bin  string
	args []string
	port int
	dir  string
	conf string // a config file, the first argument when set (a Sentinel's: see StartSentinel)
	cmd  *exec.Cmd
}

// StartRedis starts a redis-server without persistence, with extra arguments args (see
// Get for an unset SLUICE_REDIS_SERVER_BIN), and waits until it accepts connections.
func StartRedis(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	return startRedis(t, func(int, string) string { return "" }, args...)
}

// startRedis is StartRedis with a config file: conf, given the server's port and directory,
// writes it and returns its path ("" for none).
func startRedis(t testing.TB, conf func(port int, dir string) string, args ...string) *RedisServer {
	t.Helper()
	bin := Get(t, "SLUICE_REDIS_SERVER_BIN")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &RedisServer{t: t, bin: bin, args: args, port: port, dir: t.TempDir()}
	s.conf = conf(port, s.dir)
	s.Start()
	t.Cleanup(func() {
		if s.cmd != nil {
			_ = s.cmd.Process.Signal(syscall.SIGCONT)
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	return s
}

// Addr returns the server's host:port.
func (s *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Start starts the server, again after Kill, on its port and with its arguments, and returns
// when it first accepted a connection: the start of the first dial that succeeded (one a
// millisecond, for at most 10 s).
func (s *RedisServer) Start() time.Time {
	s.t.Helper()
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no", "--loglevel", "warning")
	s.cmd = exec.Command(s.bin, append(args, s.args...)...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		at := time.Now()
		c, err := net.DialTimeout("tcp", s.Addr(), 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return at
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server did not start on %s: %v", s.Addr(), err)
		}
		time.Sleep(time.Millisecond)
	}
}

// Kill sends SIGKILL to the server and reaps it.
func (s *RedisServer) Kill() {
	s.t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		s.t.Fatal(err)
	}
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Signal sends sig (SIGSTOP, SIGCONT) to the server.
func (s *RedisServer) Signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to redis-server %d: %v", sig, s.cmd.Process.Pid, err)
	}
}

// FillUntilOOM writes 64 KiB values until the server, started with a small --maxmemory and
// --maxmemory-policy noeviction, refuses a write with OOM; it fails the test if 64 MB go in
// without one.
func (s *RedisServer) FillUntilOOM(t testing.TB) {
	t.Helper()
	admin := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1})
	// Open until the test ends: the connection's buffers are part of what fills the server, so
	// closing it could bring the server back under its limit.
	t.Cleanup(func() { _ = admin.Close() })
	filler := strings.Repeat("x", 64<<10)
	for i := range 1000 {
		err := admin.Set(context.Background(), "filler:"+strconv.Itoa(i), filler, 0).Err()
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "OOM"):
			return
		case err != nil:
			t.Fatal(err)
		}
	}
	t.Fatal("64 MB written without an OOM error: start the server with a small --maxmemory")
}
