package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/memory"
)

// nginxSnippet returns the NGINX snippet of file's section title, its addresses replaced:
// the gateway's listen address, Sluice's HTTP address and the app's.
func nginxSnippet(t *testing.T, file, title, gateway, sluice, app string) string {
	t.Helper()
	return testenv.Replace(t, testenv.Block(t, file, title, "nginx", 0),
		"127.0.0.1:8000", gateway, "127.0.0.1:8080", sluice, "127.0.0.1:3000", app)
}

// Issue 35: the README's NGINX snippet in front of an app, with Sluice behind its
// auth_request, as real nginx (Debian bookworm's 1.22) runs it: the limit exact under
// concurrency, the rate-limit headers on admitted answers, Sluice's 429 with Retry-After and
// its problem+json body (turned back from auth_request's 500), a spoofed X-Forwarded-For
// counted against its sender; then Sluice down: 500, failing closed as the snippet says.
func TestNginxForwardAuth(t *testing.T) {
	h := startGatewaySluice(t)
	a := startApp(t)
	addr := testenv.FreeAddr(t)
	g := testenv.StartNginx(t, addr, nginxSnippet(t, readme, "NGINX", addr, h.srv.HTTPAddr(), a.addr()))
	base := "http://" + g.Addr
	checkGateway(t, h, base, a, true)
	checkDown(t, h, base, a, http.StatusInternalServerError, "nginx's 500 (fail closed)")
}

// Issue 35: the fail-open form of the NGINX snippet (docs/OPERATIONS.md): with Sluice
// unreachable, the app answers.
func TestNginxForwardAuthFailOpen(t *testing.T) {
	a := startApp(t)
	addr := testenv.FreeAddr(t)
	g := testenv.StartNginx(t, addr, nginxSnippet(t, operations, "NGINX failing open", addr, testenv.FreeAddr(t), a.addr()))
	checkFailsOpen(t, "http://"+g.Addr, a)
}

// Issue 35: NGINX tells the request's end: with --gateway-in-flight and the documented
// post_action, a max_in_flight of 1 refuses a second request while the first one is still
// being served (429), and admits again once its response is sent (post_action released the
// slot: well before its lease would have).
func TestNginxForwardAuthInFlight(t *testing.T) {
	mem, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	h := start(t, `
domain: edge
descriptors:
  - key: generic_key
    value: all
    max_in_flight: {limit: 1, lease: 1m}
proxy:
  rate_limits:
    - actions: [{generic_key: {descriptor_value: all}}]
`, func(c *serverConfig) { c.InFlight, c.Store, c.TrustedProxies = true, mem, []string{"127.0.0.1"} })
	started, release := make(chan struct{}), make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		_, _ = io.WriteString(w, "app\n")
	}))
	t.Cleanup(app.Close)
	addr := testenv.FreeAddr(t)
	g := testenv.StartNginx(t, addr, nginxSnippet(t, operations, "In-flight limits", addr, h.srv.HTTPAddr(), strings.TrimPrefix(app.URL, "http://")))
	base := "http://" + g.Addr
	slow := make(chan int, 1)
	go func() {
		resp, err := client("127.0.0.2").Get(base + "/slow")
		if err != nil {
			slow <- 0
			return
		}
		resp.Body.Close()
		slow <- resp.StatusCode
	}()
	select {
	case <-started:
	case status := <-slow:
		t.Fatalf("the first request: %d before reaching the app", status)
	}
	if r := getAs(t, client("127.0.0.3"), base+"/"); r.status != http.StatusTooManyRequests {
		t.Errorf("a second request while the first is served: %d %q, want 429", r.status, r.body)
	}
	close(release)
	if status := <-slow; status != http.StatusOK {
		t.Fatalf("the slow request: %d, want 200", status)
	}
	testenv.Eventually(t, 10*time.Second, "admitted again once the first response is sent", func() bool {
		return getAs(t, client("127.0.0.3"), base+"/").status == http.StatusOK
	})
}
