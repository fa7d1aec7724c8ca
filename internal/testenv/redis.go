package testenv

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
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
	// exited is closed when cmd has been reaped.
	exited chan struct{}
}

// StartRedis starts a redis-server without persistence, with extra arguments args (see
// Get for an unset SLUICE_REDIS_SERVER_BIN), and waits until it accepts connections. Its port
// comes from freePort; if another process took the port first, it starts again on another.
func StartRedis(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	return startRedis(t, func(string) string { return "" }, args...)
}

// startRedis is StartRedis with a config file: conf, given the server's directory, writes it
// and returns its path ("" for none).
func startRedis(t testing.TB, conf func(dir string) string, args ...string) *RedisServer {
	t.Helper()
	bin := Get(t, "SLUICE_REDIS_SERVER_BIN")
	s := &RedisServer{t: t, bin: bin, args: args, dir: t.TempDir()}
	s.conf = conf(s.dir)
	t.Cleanup(func() {
		if s.cmd != nil {
			_ = s.cmd.Process.Signal(syscall.SIGCONT)
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
	var err error
	for range 5 {
		s.port = freePort(t)
		if _, err = s.start(); err == nil {
			return s
		}
	}
	t.Fatal(err)
	return nil
}

// freePort returns a 127.0.0.1 port p in [10000, 20000) such that p and p+10000 (a
// Cluster node's bus port) both accept a listener now. The range lies below the kernel's
// ephemeral ports (32768 and up), so an outgoing connection cannot take p or its bus port
// between this check and the server's start, and it lies apart from scripts/test.sh's own
// servers (20000-22499, buses 30000-32499). Two tests choosing the same port at once is
// left to StartRedis's retry. When SLUICE_TEST_PORT_BASE names the base of a range of ports
// given to this run (one of several runs sharing a machine), p is taken in [base+100,
// base+600) instead, above scripts/test.sh's servers at that base.
func freePort(t testing.TB) int {
	t.Helper()
	lo, n := 10000, 10000
	if base, err := strconv.Atoi(os.Getenv("SLUICE_TEST_PORT_BASE")); err == nil && base > 0 && base+600+10000 < 32768 {
		lo, n = base+100, 500
	}
	for range 1000 {
		p := lo + rand.IntN(n)
		if portFree(p) && portFree(p+10000) {
			return p
		}
	}
	t.Fatalf("no free port pair in [%d, %d)", lo, lo+n)
	return 0
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// Addr returns the server's host:port.
func (s *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Start starts the server, again after Kill, on its port and with its arguments, and returns
// when it first accepted a connection: the start of the first dial that succeeded (one a
// millisecond, for at most 10 s).
func (s *RedisServer) Start() time.Time {
	s.t.Helper()
	at, err := s.start()
	if err != nil {
		s.t.Fatal(err)
	}
	return at
}

// start is Start returning its failure: the server exited (its port taken, say) or did not
// accept a connection within 10 s.
func (s *RedisServer) start() (time.Time, error) {
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no", "--loglevel", "warning")
	cmd := exec.Command(s.bin, append(args, s.args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return time.Time{}, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(10 * time.Second)
	for {
		at := time.Now()
		c, err := net.DialTimeout("tcp", s.Addr(), 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			if err = s.ours(cmd.Process.Pid); err == nil {
				return at, nil
			}
		}
		select {
		case <-exited:
			s.cmd = nil
			return time.Time{}, fmt.Errorf("redis-server on %s exited: %s", s.Addr(), bytes.TrimSpace(out.Bytes()))
		default:
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("redis-server did not start on %s: %v", s.Addr(), err)
		}
		time.Sleep(time.Millisecond)
	}
}

// ours says whether the server answering on the port is the process pid, not another one
// that held the port first.
func (s *RedisServer) ours(pid int) error {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond})
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "process_id:"+strconv.Itoa(pid)+"\r\n") {
		return fmt.Errorf("port %d answered by another process", s.port)
	}
	return nil
}

// Kill sends SIGKILL to the server and reaps it.
func (s *RedisServer) Kill() {
	s.t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		s.t.Fatal(err)
	}
	<-s.exited
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
