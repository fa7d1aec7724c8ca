package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Gateway is a gateway (nginx, caddy) started by a test: a real process on a loopback port,
// stopped by PID when the test ends.
type Gateway struct {
	// Addr is the host:port it listens on.
	Addr string
	// Log is the file its errors go to.
	Log string
	cmd *exec.Cmd
}

// FreeAddr returns a loopback address nothing listens on now (a port the kernel chose).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// StartNginx runs SLUICE_NGINX (the nginx binary scripts/test.sh installs) with http, the
// text of an http { } block (server blocks), in one process as the calling user (master_process
// off: no privileges needed, temporary files in a directory of the test), and waits until
// it listens on addr.
func StartNginx(t testing.TB, addr, http string) *Gateway {
	t.Helper()
	bin := Get(t, "SLUICE_NGINX")
	dir := t.TempDir()
	g := &Gateway{Addr: addr, Log: filepath.Join(dir, "error.log")}
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[2]s warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path %[1]s/client_body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
%[3]s
}
`, dir, g.Log, http)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	g.start(t, exec.Command(bin, "-e", g.Log, "-p", dir, "-c", path))
	return g
}

// StartCaddy runs SLUICE_CADDY (the caddy binary scripts/test.sh installs) with caddyfile, a
// Caddyfile's site blocks, under global options that keep it to the test (no admin endpoint,
// no automatic HTTPS, its storage in a directory of the test, a grace period of 100ms: a
// client's spare connection, opened and never used, would otherwise hold its stop for Go's 5 s
// of http.Server.Shutdown), and waits until it listens on addr.
func StartCaddy(t testing.TB, addr, caddyfile string) *Gateway {
	t.Helper()
	bin := Get(t, "SLUICE_CADDY")
	dir := t.TempDir()
	g := &Gateway{Addr: addr, Log: filepath.Join(dir, "caddy.log")}
	conf := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n\tgrace_period 100ms\n\tstorage file_system %s\n\tlog {\n\t\toutput file %s\n\t}\n}\n\n%s", dir, g.Log, caddyfile)
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	g.start(t, cmd)
	return g
}

func (g *Gateway) start(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	var out LogBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.cmd = cmd
	exited := make(chan struct{}) // closed when it exits, its error in waitErr
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(g.Log)
			t.Logf("%s output:\n%s\n%s", filepath.Base(cmd.Path), out.String(), b)
		}
	})
	deadline := time.Now().Add(30 * time.Second) // a loaded machine may be slow to start it
	for {
		c, err := net.DialTimeout("tcp", g.Addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(g.Log)
			t.Fatalf("%s exited before listening on %s: %v\n%s\n%s", filepath.Base(cmd.Path), g.Addr, waitErr, out.String(), b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not listening on %s within 30s", filepath.Base(cmd.Path), g.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CPU returns the CPU time (user and system) the gateway's process has used so far, read from
// /proc; 0 where there is none.
func (g *Gateway) CPU() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", g.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(b), ") ") // after the command name, which may hold spaces
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // clock ticks: USER_HZ is 100 on Linux
}

// Block returns the first block of a fenced code block of language lang (```lang) in the
// section of the Markdown file path under a heading that is exactly title, from its first
// line to its closing fence: the text a reader copies. n picks the nth such block (0 the
// first).
func Block(t testing.TB, path, title, lang string, n int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	head := regexp.MustCompile(`(?m)^#{2,} ` + regexp.QuoteMeta(title) + `\n`).FindStringIndex(text)
	if head == nil {
		t.Fatalf("%s: no section %q", path, title)
	}
	text = text[head[1]:]
	if end := regexp.MustCompile(`(?m)^#{2,} `).FindStringIndex(text); end != nil {
		text = text[:end[0]]
	}
	blocks := regexp.MustCompile("(?ms)^```"+regexp.QuoteMeta(lang)+"\n(.*?)^```\n").FindAllStringSubmatch(text, -1)
	if n >= len(blocks) {
		t.Fatalf("%s: section %q has %d ```%s blocks, want block %d", path, title, len(blocks), lang, n)
	}
	return blocks[n][1]
}

// Replace returns s with each old of pairs (old, new, old, new, ...) replaced by its new,
// failing the test when an old is not in s (the documented text changed).
func Replace(t testing.TB, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("%q is not in the snippet:\n%s", pairs[i], s)
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s
}
