package proxy_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/store"
)

// TestAdminEndpointsOnlyOnAdminAddress: /metrics, /healthz and /readyz answer on the admin
// address; on the proxy's address the same paths are the upstream's.
func TestAdminEndpointsOnlyOnAdminAddress(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, up, everyone)
	get(t, p.base+"/x")
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		deadline := time.Now().Add(5 * time.Second)
		resp, body := get(t, p.admin+path)
		for resp.StatusCode != http.StatusOK && time.Now().Before(deadline) { // readiness comes with Serve
			time.Sleep(10 * time.Millisecond)
			resp, body = get(t, p.admin+path)
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("admin %s: status %d: %s", path, resp.StatusCode, body)
		}
		if path == "/metrics" {
			for _, m := range []string{`sluice_proxy_requests_total{result="forwarded"} 1`, `sluice_decisions_total{domain="edge",result="ok",rule="edge.generic_key_all"} 1`} {
				if !strings.Contains(body, m) {
					t.Errorf("metrics lack %s", m)
				}
			}
		}
		hits := up.hits.Load()
		resp, body = get(t, p.base+path)
		if resp.StatusCode != http.StatusOK || body != "ok "+path || up.hits.Load() != hits+1 {
			t.Errorf("proxy %s: status %d %q: want the upstream's answer", path, resp.StatusCode, body)
		}
	}
}

// TestUpstreamDown: an upstream that refuses connections is a 502, counted.
func TestUpstreamDown(t *testing.T) {
	up := newUpstream(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + lis.Addr().String()
	lis.Close()
	p := startProxy(t, up, everyone, func(c *proxy.Config) { c.Upstream = dead })
	if resp, body := get(t, p.base+"/"); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d %q, want 502", resp.StatusCode, body)
	}
	_, metrics := get(t, p.admin+"/metrics")
	if !strings.Contains(metrics, "sluice_proxy_upstream_errors_total 1") {
		t.Errorf("upstream error not counted")
	}
	if !strings.Contains(metrics, `sluice_proxy_upstream_timeouts_total{phase="response_header"} 0`) {
		t.Errorf("a refused upstream counted as a timeout")
	}
}

// TestUpstreamCredentialsNotLogged (issue 31, item 3): the userinfo of --upstream appeared in
// the start-up line and in every "upstream error" line; both show it masked now, and a URL
// that does not parse is refused without quoting it.
func TestUpstreamCredentialsNotLogged(t *testing.T) {
	const secret = "s3cret-upstream"
	up := newUpstream(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://svc:" + secret + "@" + lis.Addr().String()
	lis.Close()
	var logs testenv.LogBuffer
	p := startProxy(t, up, everyone, func(c *proxy.Config) { c.Upstream, c.Logger = dead, newJSONLogger(&logs) })
	if resp, body := get(t, p.base+"/"); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d %q, want 502", resp.StatusCode, body)
	}
	testenv.Eventually(t, 5*time.Second, "the upstream error logged", func() bool { return len(logs.Records(t, "upstream error")) > 0 })
	serving := logs.Records(t, "sluice proxy serving")
	if len(serving) != 1 || serving[0]["upstream"] != "http://svc:xxxxx@"+lis.Addr().String() {
		t.Errorf("start-up line: %v, want the upstream with its password masked", serving)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the upstream's password is logged:\n%s", logs.String())
	}
	for _, bad := range []string{"http://svc:pa/ss-" + secret + "@h:1", "http://svc:pa ss-" + secret + "@h:1", "ftp://svc:" + secret + "@h:1", "http://svc:" + secret + "@"} {
		if _, err := proxy.New(proxy.Config{Upstream: bad, Rules: nil}); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("proxy.New(%q): %v, want an error that does not quote the password", bad, err)
		}
	}
}

// TestStoreErrorsFollowTheFallback: with the store down, no fallback answers 503, fail_open
// forwards, fail_closed denies.
func TestStoreErrorsFollowTheFallback(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadRedis := "redis://" + lis.Addr().String()
	lis.Close()
	for _, tc := range []struct {
		fallback string
		want     int
	}{{"", http.StatusServiceUnavailable}, {"fail_open", http.StatusOK}, {"fail_closed", http.StatusTooManyRequests}} {
		t.Run("fallback="+tc.fallback, func(t *testing.T) {
			up := newUpstream(t)
			p := startProxy(t, up, everyone, func(c *proxy.Config) {
				c.StoreConfig = store.Config{Backend: store.Backend{URL: deadRedis, Timeout: 50 * time.Millisecond}, Decorators: store.Decorators{Fallback: tc.fallback}}
			})
			for range 3 {
				resp, body := get(t, p.base+"/")
				if resp.StatusCode != tc.want {
					t.Fatalf("status %d %q, want %d", resp.StatusCode, body, tc.want)
				}
				if tc.want == http.StatusServiceUnavailable && (resp.Header.Get("Retry-After") != "1" ||
					!strings.Contains(body, httplimit.ProblemTemporaryReducedCapacity)) {
					t.Errorf("503: %v %s; want the middleware's temporary-reduced-capacity problem", resp.Header, body)
				}
			}
			if want := int64(0); tc.want == http.StatusOK {
				want = 3
				if up.hits.Load() != want {
					t.Errorf("%d requests reached the upstream, want %d", up.hits.Load(), want)
				}
			} else if up.hits.Load() != want {
				t.Errorf("%d requests reached the upstream, want none", up.hits.Load())
			}
		})
	}
}

// perKey limits each API key, the key coming from a header.
const perKey = `
domain: edge
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: fixed_window}
proxy:
  rate_limits:
    - actions:
        - request_headers: {header_name: X-Api-Key, descriptor_key: api_key}
`

// TestBadInputConsumesNothing: a header value too long for a store key, or with a control
// character, is refused with 400 and a log line; it takes nothing from anyone's quota.
// Requests without the header build no descriptor and pass unlimited.
func TestBadInputConsumesNothing(t *testing.T) {
	up := newUpstream(t)
	var logs testenv.LogBuffer
	p := startProxy(t, up, perKey, func(c *proxy.Config) { c.Logger = newJSONLogger(&logs) })
	long := strings.Repeat("k", 2000)
	for _, h := range []string{"X-Api-Key: " + long, "X-Api-Key: a\tb"} {
		if resp, body := get(t, p.base+"/", h); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "descriptors[0]") || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%.40s: status %d %q, want 400 naming the descriptor", h, resp.StatusCode, body)
		}
	}
	if recs := logs.Records(t, "request refused"); len(recs) != 1 { // at most one a second
		t.Errorf("%d log lines for the refused requests, want 1", len(recs))
	}
	if passed, _ := countPassed(t, p.base+"/", 2, "X-Api-Key: a"); passed != 2 {
		t.Errorf("key a: %d of its 2 passed after the refused requests", passed)
	}
	if passed, denied := countPassed(t, p.base+"/", 5); passed != 5 || denied != 0 {
		t.Errorf("without the header: %d passed, %d denied; want all 5 to pass", passed, denied)
	}
	if up.hits.Load() != 7 {
		t.Errorf("%d requests reached the upstream, want 7", up.hits.Load())
	}
}

// TestReloadChangesTheLimit: a rules change, picked up by Reload (the poll's own step),
// applies to the next request; an invalid change keeps the previous rules.
func TestReloadChangesTheLimit(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, up, perKey)
	if passed, _ := countPassed(t, p.base+"/", 5, "X-Api-Key: a"); passed != 2 {
		t.Fatalf("%d passed, want 2", passed)
	}
	write := func(s string) {
		if err := os.WriteFile(p.rules, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(strings.Replace(perKey, "requests_per_unit: 2", "requests_per_unit: 4", 1))
	if ok, err := p.Reload(); !ok || err != nil {
		t.Fatalf("reload: %v %v", ok, err)
	}
	if passed, _ := countPassed(t, p.base+"/", 5, "X-Api-Key: a"); passed != 2 {
		t.Errorf("after raising the limit to 4: %d more passed, want 2", passed)
	}
	write(strings.Replace(perKey, "header_name: X-Api-Key", "header_name: X Api Key", 1))
	if ok, err := p.Reload(); ok || err == nil {
		t.Fatalf("invalid reload applied: %v %v", ok, err)
	}
	if passed, _ := countPassed(t, p.base+"/", 1, "X-Api-Key: b"); passed != 1 {
		t.Errorf("after a rejected reload: key b denied")
	}
}

// TestGracefulShutdown: on shutdown /readyz fails, the listener stops accepting, and an
// in-flight request finishes; a WebSocket still open when the drain times out is cut, and
// Serve returns soon after.
func TestGracefulShutdown(t *testing.T) {
	up := newUpstream(t)
	release, entered := make(chan struct{}), make(chan struct{})
	up.mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	up.mux.HandleFunc("/ws", wsEcho)
	p := startProxy(t, up, everyone, func(c *proxy.Config) { c.ShutdownTimeout = 2 * time.Second })
	type answer struct {
		code int
		body string
		err  error
	}
	slow := make(chan answer, 1)
	go func() {
		resp, err := http.Get(p.base + "/slow")
		if err != nil {
			slow <- answer{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- answer{resp.StatusCode, string(b), err}
	}()
	<-entered
	conn, br, resp := dialUpgrade(t, p.Addr(), "/ws")
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: status %d", resp.StatusCode)
	}
	stopped := make(chan error, 1)
	start := time.Now()
	go func() { stopped <- p.stop() }()
	waitFor(t, func() bool { r, _ := get(t, p.admin+"/readyz"); return r.StatusCode == http.StatusServiceUnavailable })
	waitFor(t, func() bool {
		c, err := net.Dial("tcp", p.Addr())
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	close(release)
	if a := <-slow; a.err != nil || a.code != http.StatusOK || a.body != "finished" {
		t.Errorf("in-flight request: %d %q %v; want 200 finished", a.code, a.body, a.err)
	}
	if _, err := io.WriteString(conn, "still there\n"); err != nil { // open during the drain
		t.Fatal(err)
	}
	if line, err := br.ReadString('\n'); err != nil || line != "still there\n" {
		t.Fatalf("echo during the drain: %q %v", line, err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the drain timed out")
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("Serve returned after %v, before the drain timeout with a WebSocket open", took)
	}
	if _, err := br.ReadString('\n'); err == nil {
		t.Error("the WebSocket is still open after the drain")
	}
}

// waitFor polls cond every 5 ms for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
