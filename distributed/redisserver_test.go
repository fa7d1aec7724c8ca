package distributed

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// redisServer is a redis-server this test started on a free 127.0.0.1 port, so failure
// tests can kill, stop and restart it (by its PID) without touching anyone else's.
type redisServer struct {
	t    *testing.T
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

func startRedisServer(t *testing.T) *redisServer {
	t.Helper()
	bin := testenv.Get(t, "SLUICE_REDIS_SERVER_BIN")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &redisServer{t: t, bin: bin, port: port, dir: t.TempDir()}
	s.start()
	t.Cleanup(func() {
		if s.cmd != nil {
			s.cmd.Process.Signal(syscall.SIGCONT)
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
	})
	return s
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *redisServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no", "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr(), 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server did not start on %s: %v", s.addr(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill sends SIGKILL to the server this test started and reaps it.
func (s *redisServer) kill() {
	s.t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd.Wait()
	s.cmd = nil
}

// signal sends sig (SIGSTOP, SIGCONT) to the server this test started.
func (s *redisServer) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(fmt.Errorf("signal %v to redis-server %d: %w", sig, s.cmd.Process.Pid, err))
	}
}
