package server_test

import (
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
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
	checkGateway(t, base, a, true)
	stopSluice(t, h)
	before := a.hits.Load()
	if r := getAs(t, client("127.0.0.4"), base+"/"); r.status != http.StatusInternalServerError {
		t.Errorf("Sluice down: %d %q, want nginx's 500 (fail closed)", r.status, r.body)
	}
	if a.hits.Load() != before {
		t.Error("Sluice down: the app was reached, want fail closed")
	}
}

// Issue 35: the fail-open form of the NGINX snippet (docs/OPERATIONS.md): with Sluice
// unreachable, the app answers.
func TestNginxForwardAuthFailOpen(t *testing.T) {
	a := startApp(t)
	addr := testenv.FreeAddr(t)
	g := testenv.StartNginx(t, addr, nginxSnippet(t, operations, "NGINX failing open", addr, testenv.FreeAddr(t), a.addr()))
	if r := getAs(t, client("127.0.0.2"), "http://"+g.Addr+"/"); r.status != http.StatusOK || r.body != "app\n" || a.hits.Load() != 1 {
		t.Errorf("Sluice unreachable: %d %q (the app saw %d), want the app's answer", r.status, r.body, a.hits.Load())
	}
}
