package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// caddySnippet returns the Caddyfile of file's section title, its addresses replaced.
func caddySnippet(t *testing.T, file, title, gateway, sluice, app string) string {
	t.Helper()
	_, port, _ := strings.Cut(gateway, ":")
	return testenv.Replace(t, testenv.Block(t, file, title, "caddyfile", 0),
		":8000 {", ":"+port+" {", "127.0.0.1:8080", sluice, "127.0.0.1:3000", app)
}

// Issue 35: the README's Caddyfile in front of an app, with Sluice behind its forward_auth,
// as real caddy (Debian bookworm's 2.6.2) runs it: the limit exact under concurrency, the
// rate-limit headers copied onto admitted answers, Sluice's 429 passed whole, a spoofed
// X-Forwarded-For counted against its sender; then Sluice down: Caddy's 502, failing closed.
func TestCaddyForwardAuth(t *testing.T) {
	h := startGatewaySluice(t)
	a := startApp(t)
	addr := testenv.FreeAddr(t)
	g := testenv.StartCaddy(t, addr, caddySnippet(t, readme, "Caddy", addr, h.srv.HTTPAddr(), a.addr()))
	base := "http://" + g.Addr
	checkGateway(t, h, base, a, true)
	checkDown(t, h, base, a, http.StatusBadGateway, "Caddy's 502 (fail closed)")
}

// Issue 35: the fail-open form of the Caddyfile (docs/OPERATIONS.md): with Sluice
// unreachable, the app answers.
func TestCaddyForwardAuthFailOpen(t *testing.T) {
	a := startApp(t)
	addr := testenv.FreeAddr(t)
	g := testenv.StartCaddy(t, addr, caddySnippet(t, operations, "Caddy failing open", addr, testenv.FreeAddr(t), a.addr()))
	checkFailsOpen(t, "http://"+g.Addr, a)
}
