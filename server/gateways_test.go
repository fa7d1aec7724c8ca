package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/server"
)

// The helpers of the gateways' tests (gateways_*_test.go): Sluice with the rules of the
// README's "Where it fits" section, an app behind the gateway, and clients on loopback
// addresses of their own (127.0.0.2, 127.0.0.3, ...), so that the gateway (127.0.0.1, the
// only trusted proxy) and each client are told apart as on a network.

const (
	readme     = "../README.md"
	operations = "../docs/OPERATIONS.md"
)

// gatewayRules are the rules of the README's "Where it fits" section.
func gatewayRules(t *testing.T) string {
	return testenv.Block(t, readme, "Where it fits", "yaml", 0)
}

// startGatewaySluice runs Sluice with the README's rules, trusting 127.0.0.1 (the gateway).
func startGatewaySluice(t *testing.T, mutate ...func(*server.Config)) *harness {
	t.Helper()
	return start(t, gatewayRules(t), append([]func(*server.Config){func(c *server.Config) {
		c.TrustedProxies = []string{"127.0.0.1"}
		// A gateway's spare connection, opened and not yet used, would hold the graceful
		// shutdown of the outage checks for Go's 5 s (http.Server.Shutdown's StateNew rule).
		c.ShutdownTimeout = 500 * time.Millisecond
	}}, mutate...)...)
}

// app is the service behind a gateway: it counts the requests that reach it and keeps the
// last one's header.
type app struct {
	srv  *httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	last http.Header
}

func startApp(t *testing.T) *app {
	a := &app{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.hits.Add(1)
		a.mu.Lock()
		a.last = r.Header.Clone()
		a.mu.Unlock()
		_, _ = io.WriteString(w, "app\n")
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *app) addr() string { return strings.TrimPrefix(a.srv.URL, "http://") }

func (a *app) lastHeader() http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

var clients sync.Map // ip -> *http.Client

// client returns the HTTP client whose connections come from the loopback address ip (one
// per address, keeping its connections alive).
func client(ip string) *http.Client {
	if c, ok := clients.Load(ip); ok {
		return c.(*http.Client)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c, _ := clients.LoadOrStore(ip, &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 128}})
	return c.(*http.Client)
}

// reply is an answer seen by a client.
type reply struct {
	status int
	header http.Header
	body   string
}

func getAs(t *testing.T, c *http.Client, url string, header ...string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// burst sends n requests at once from c and returns how many were answered with each status.
func burst(t *testing.T, c *http.Client, url string, n int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := c.Get(url)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			counts[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return counts
}

// checkGateway runs the checks every gateway passes, through the gateway at base: the
// README's limit (100 a minute per client) exact under 110 concurrent requests of one
// client, the app reached by the admitted ones only; the rate-limit headers on an admitted
// answer when okHeaders; a denial's 429 with Retry-After, the rate-limit headers and the
// problem+json body naming the policy; a spoofed X-Forwarded-For counted against its
// sender, not the client it names; another client untouched. Sluice's own count of the
// requests it admitted (sluice_gateway_requests_total) matches what the clients and the app
// saw: a gateway that let a request through without asking Sluice fails here (as Caddy did
// before the README's Caddyfile turned keep-alive off, see TestCaddyForwardAuth).
func checkGateway(t *testing.T, h *harness, base string, a *app, okHeaders bool) {
	t.Helper()
	alice, bob := client("127.0.0.2"), client("127.0.0.3")
	if r := getAs(t, bob, base+"/"); r.status != http.StatusOK || r.body != "app\n" {
		t.Fatalf("bob's first request: %d %q", r.status, r.body)
	} else if okHeaders && (!strings.Contains(r.header.Get("RateLimit"), `"edge.remote_address";r=99;`) || r.header.Get("RateLimit-Policy") == "") {
		t.Errorf("bob's admitted answer: RateLimit %q, RateLimit-Policy %q; want the rate-limit headers", r.header.Get("RateLimit"), r.header.Get("RateLimit-Policy"))
	}
	before, allowed := a.hits.Load(), h.gatewayAllowed(t)
	counts := burst(t, alice, base+"/", 110)
	if counts[http.StatusOK] != 100 || counts[http.StatusTooManyRequests] != 10 {
		t.Errorf("110 concurrent requests of one client: %v, want 100 admitted and 10 denied", counts)
	}
	if got := h.gatewayAllowed(t) - allowed; got != 100 {
		t.Errorf("110 concurrent requests of one client: Sluice admitted %d, want 100", got)
	}
	if got := a.hits.Load() - before; got != 100 {
		t.Errorf("the app saw %d requests, want the 100 admitted", got)
	}
	r := getAs(t, alice, base+"/")
	var p struct {
		Type     string   `json:"type"`
		Status   int      `json:"status"`
		Violated []string `json:"violated-policies"`
	}
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || r.status != http.StatusTooManyRequests {
		t.Fatalf("alice past her limit: %d %q (%v), want 429 and a problem", r.status, r.body, err)
	}
	if p.Status != 429 || len(p.Violated) != 1 || p.Violated[0] != "edge.remote_address" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("the denial's body %q (Content-Type %q): want the quota-exceeded problem naming edge.remote_address", r.body, r.header.Get("Content-Type"))
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || !strings.Contains(r.header.Get("RateLimit"), "r=0") {
		t.Errorf("the denial's Retry-After %q, RateLimit %q: want a number of seconds and r=0", r.header.Get("Retry-After"), r.header.Get("RateLimit"))
	}
	// alice (127.0.0.2) claims to be bob: she is counted, bob is not.
	for _, spoof := range [][2]string{{"X-Forwarded-For", "127.0.0.3"}, {"Forwarded", "for=127.0.0.3"}, {"X-Real-Ip", "127.0.0.3"}} {
		if r := getAs(t, alice, base+"/", spoof[0], spoof[1]); r.status != http.StatusTooManyRequests {
			t.Errorf("alice behind a spoofed %s: %d, want her own 429", spoof[0], r.status)
		}
	}
	if r := getAs(t, bob, base+"/"); r.status != http.StatusOK {
		t.Errorf("bob after alice's spoofed requests: %d, want 200", r.status)
	} else if okHeaders && !strings.Contains(r.header.Get("RateLimit"), `"edge.remote_address";r=98;`) {
		t.Errorf("bob's second request: RateLimit %q, want r=98 (alice's requests not counted against him)", r.header.Get("RateLimit"))
	}
}

// stopSluice stops h's server (as an outage) and waits until its HTTP port refuses.
func stopSluice(t *testing.T, h *harness) {
	t.Helper()
	h.stop()
	c := client("127.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/healthz", nil)
		resp, err := c.Do(req)
		if err != nil {
			return
		}
		resp.Body.Close()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("sluice still answers after stop")
}

// checkDown stops h's Sluice and checks the gateway at base answers want without reaching
// the app: the failure policy the gateway's snippet chose (failing closed).
func checkDown(t *testing.T, h *harness, base string, a *app, want int, what string) {
	t.Helper()
	stopSluice(t, h)
	before := a.hits.Load()
	if r := getAs(t, client("127.0.0.4"), base+"/"); r.status != want {
		t.Errorf("Sluice down: %d %q, want %s", r.status, r.body, what)
	}
	if a.hits.Load() != before {
		t.Error("Sluice down: the app was reached, want fail closed")
	}
}

// checkFailsOpen checks the gateway at base, its Sluice unreachable, answers with the app.
func checkFailsOpen(t *testing.T, base string, a *app) {
	t.Helper()
	if r := getAs(t, client("127.0.0.2"), base+"/"); r.status != http.StatusOK || r.body != "app\n" || a.hits.Load() != 1 {
		t.Errorf("Sluice unreachable: %d %q (the app saw %d), want the app's answer", r.status, r.body, a.hits.Load())
	}
}

// gatewayAllowed returns how many requests h's doors have admitted so far.
func (h *harness) gatewayAllowed(t *testing.T) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(h.metrics(t), "\n") {
		if strings.HasPrefix(line, "sluice_gateway_requests_total{") && strings.Contains(line, `result="allowed"`) {
			v, err := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
			if err != nil {
				t.Fatalf("metrics: %q", line)
			}
			n += v
		}
	}
	return n
}
