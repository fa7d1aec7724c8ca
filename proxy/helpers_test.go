package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// upstream is a local HTTP server behind the proxy: it answers "ok <path>" and counts the
// requests that reach it; other handlers are mounted by tests.
type upstream struct {
	*httptest.Server
	mux  *http.ServeMux
	hits atomic.Int64
	// lastXFF is the X-Forwarded-For of the last request.
	lastXFF atomic.Value
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{mux: http.NewServeMux()}
	u.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "ok %s", r.URL.Path)
	})
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.lastXFF.Store(r.Header.Get("X-Forwarded-For"))
		u.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) xff() string { v, _ := u.lastXFF.Load().(string); return v }

// running is a proxy serving in the background until the test ends (or stop is called).
type running struct {
	*proxy.Proxy
	clock *sluicetest.ManualClock
	rules string // the rules file
	base  string // http://host:port of the proxy
	admin string // http://host:port of the admin endpoints
	stop  func() error
}

// startProxy runs a proxy to up on 127.0.0.1:0 with rules (YAML text written to a file), on
// a memory store with a manual clock unless mutate sets another store.
func startProxy(t *testing.T, up *upstream, rules string, mutate ...func(*proxy.Config)) *running {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := sluicetest.NewManualClock(t0)
	cfg := proxy.Config{Upstream: up.URL, Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", RulesPath: path,
		ReloadInterval: -1, StoreConfig: store.Config{Backend: store.Backend{Clock: clock}}, ShutdownTimeout: 5 * time.Second}
	for _, m := range mutate {
		m(&cfg)
	}
	p, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	stopped := false
	var serveErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case serveErr = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Serve did not return within 30 s of its context ending")
			}
		}
		return serveErr
	}
	t.Cleanup(func() { _ = stop() })
	return &running{Proxy: p, clock: clock, rules: path, base: "http://" + p.Addr(), admin: "http://" + p.AdminAddr(), stop: stop}
}

// get sends a GET with the given headers ("Name: value") and returns the status and body.
func get(t *testing.T, url string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	return send(t, req)
}

// send sends req and returns the response and its whole body.
func send(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// countPassed sends n GETs and returns how many were forwarded (200) and denied (429),
// failing on any other status.
func countPassed(t *testing.T, url string, n int, headers ...string) (passed, denied int) {
	t.Helper()
	for range n {
		resp, body := get(t, url, headers...)
		switch resp.StatusCode {
		case http.StatusOK:
			passed++
		case http.StatusTooManyRequests:
			denied++
		default:
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	return passed, denied
}

// wsEcho is an upstream handler that accepts an Upgrade: websocket request by hijacking the
// connection and echoes every byte back: the smallest upgrade a proxy must pass through.
func wsEcho(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.Error(w, "want an upgrade", http.StatusBadRequest)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	_ = brw.Flush()
	_, _ = io.Copy(conn, brw)
}

// dialUpgrade opens a connection to the proxy and asks for a WebSocket upgrade of path; it
// returns the connection, its reader and the response.
func dialUpgrade(t *testing.T, addr, path string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", path)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn, br, resp
}

func newJSONLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }
