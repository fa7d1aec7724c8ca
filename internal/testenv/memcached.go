package testenv

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// MemcachedServer is a memcached a test started itself on a free 127.0.0.1 port, so that it
// can kill it by its PID without touching the server other tests share. The test's cleanup
// kills it.
type MemcachedServer struct {
	t    testing.TB
	port int
	cmd  *exec.Cmd
}

// StartMemcached starts a memcached (the binary of SLUICE_MEMCACHED_BIN, or memcached on the
// PATH; see Get when neither is found) with 16 MB of memory, and waits until it accepts
// connections.
func StartMemcached(t testing.TB) *MemcachedServer {
	t.Helper()
	return startMemcached(t)
}

// startMemcached is StartMemcached with extra arguments.
func startMemcached(t testing.TB, extra ...string) *MemcachedServer {
	t.Helper()
	bin := os.Getenv("SLUICE_MEMCACHED_BIN")
	if bin == "" {
		if p, err := exec.LookPath("memcached"); err == nil {
			bin = p
		} else {
			bin = Get(t, "SLUICE_MEMCACHED_BIN")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	args := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", "16"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody") // memcached refuses to run as root
	}
	args = append(args, extra...)
	s := &MemcachedServer{t: t, port: port, cmd: exec.Command(bin, args...)}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd != nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), 100*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached did not start on %s: %v", s.Addr(), err)
		}
		time.Sleep(time.Millisecond)
	}
}

// Addr returns the server's host:port.
func (s *MemcachedServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Kill sends SIGKILL to the server and reaps it.
func (s *MemcachedServer) Kill() {
	s.t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		s.t.Fatal(err)
	}
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Signal sends sig (SIGSTOP, SIGCONT) to the server: stopped, it keeps its connections open
// and the kernel accepts new ones, but nothing is answered.
func (s *MemcachedServer) Signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to memcached %d: %v", sig, s.cmd.Process.Pid, err)
	}
}
