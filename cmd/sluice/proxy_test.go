package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProxyValidatesFlags: a missing --upstream or --config, or a bad store flag, is a
// usage error naming the flag, before anything listens.
func TestProxyValidatesFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--config", "rules.yaml"}, "--upstream"},
		{[]string{"--upstream", "http://127.0.0.1:1"}, "--config"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--mode", "psychic"}, "--mode"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--fallback", "pray"}, "--fallback"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--shutdown-timeout", "0s"}, "--shutdown-timeout"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--headers", "draft"}, "--headers"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--trusted-proxies", "10.0.0.0/8,lb.internal"}, "--trusted-proxies"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--admin-addr", "0.0.0.0:9000"}, "--admin-addr"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--admin-addr", ":9000"}, "--admin-addr"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--admin-addr", "nonsense"}, "--admin-addr"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--upstream-response-header-timeout", "-1s"}, "--upstream-response-header-timeout"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--upstream-idle-timeout", "-1s"}, "--upstream-idle-timeout"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--request-body-timeout", "-1s"}, "--request-body-timeout"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--max-conns", "-2"}, "--max-conns"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--config", "r.yaml", "--fd-spare", "-1"}, "--fd-spare"},
	} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"proxy"}, tc.args...), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tc.flag+":") {
			t.Errorf("%v: exit %d, %q; want 2 naming %s", tc.args, code, errOut.String(), tc.flag)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"proxy", "--upstream", "ftp://x", "--config", "../../examples/config", "--http-addr", "127.0.0.1:0", "--admin-addr", "-"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "upstream") {
		t.Errorf("ftp upstream: exit %d, %q", code, errOut.String())
	}
}

// TestProxyAdminPublic: a non-loopback --admin-addr is refused without --admin-public (see
// TestProxyValidatesFlags) and warned about with it. The address here is one no interface
// has, so nothing is exposed: the proxy then fails to listen, after the warning.
func TestProxyAdminPublic(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"proxy", "--upstream", "http://127.0.0.1:1", "--config", "../../examples/proxy/rules.yaml",
		"--http-addr", "127.0.0.1:0", "--admin-addr", "192.0.2.1:9", "--admin-public"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "admin listener on a non-loopback address") || !strings.Contains(errOut.String(), "admin-addr") {
		t.Errorf("exit %d, %q: want the warning, then a failure to listen on 192.0.2.1:9", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"proxy", "--upstream", "http://127.0.0.1:1", "--config", "../../examples/proxy/rules.yaml",
		"--http-addr", "127.0.0.1:0", "--admin-addr", "localhost:99999"}, &out, &errOut); code != 1 || strings.Contains(errOut.String(), "non-loopback") {
		t.Errorf("loopback admin address: exit %d, %q: want no warning", code, errOut.String())
	}
}

// TestProxySIGTERM runs sluice proxy in a child process (this test binary), sends a request
// through it and stops it with SIGTERM: it drains and exits 0.
func TestProxySIGTERM(t *testing.T) {
	if args := os.Getenv("SLUICE_TEST_PROXY_ARGS"); args != "" {
		os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr))
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "upstream") }))
	defer up.Close()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 1}\nproxy:\n  rate_limits:\n    - actions: [{remote_address: {}}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestProxySIGTERM$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("SLUICE_TEST_PROXY_ARGS=proxy --log-format json --addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 --upstream %s --config %s", up.URL, rules))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "sluice proxy serving" {
				addr <- rec.Addr
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(20 * time.Second):
		t.Fatal("sluice proxy did not start within 20 s")
	}
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		resp, err := http.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("request %d: status %d, want %d", i, resp.StatusCode, want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("sluice proxy after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("sluice proxy did not exit within 20 s of SIGTERM")
	}
}
