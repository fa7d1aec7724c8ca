package secrettest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/internal/tracing/otlptest"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// The property, for every door: a request's value — the secret, a fresh one each run, sent
// where requests carry API keys (a header, a query parameter, gRPC metadata, a descriptor
// value, the key of the HTTP API) — appears in no log line, span, metrics page, status or
// response body, when the store fails (the "check 0 (key ...)" in every log, span and
// 503/UNAVAILABLE) and when the input is invalid (a value with a control character, a key too
// long for the store: the raw value in the span status). Values are hashed
// (internal/redact.Hash, as telemetry shows them) or left out.

// newSecret returns a recognisable secret, its own for each run.
func newSecret() string { return fmt.Sprintf("sk-live-%016x", rand.Uint64()) }

// outputs collects, by where they came from, the texts a door produced.
type outputs struct {
	mu    sync.Mutex
	texts map[string][]string
}

func (o *outputs) add(where, text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.texts == nil {
		o.texts = map[string][]string{}
	}
	o.texts[where] = append(o.texts[where], text)
}

// check fails the test for every text holding the secret, and when a place it must have
// heard from (wantFrom) produced nothing.
func (o *outputs) check(t *testing.T, secret string, wantFrom ...string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for where, texts := range o.texts {
		for _, text := range texts {
			if strings.Contains(text, secret) {
				t.Errorf("%s: the request's value %q appears raw:\n%s", where, secret, text)
			}
		}
	}
	for _, where := range wantFrom {
		if len(o.texts[where]) == 0 {
			t.Errorf("nothing from %s: the door was not driven", where)
		}
	}
	counts := make([]string, 0, len(o.texts))
	for where, texts := range o.texts {
		counts = append(counts, fmt.Sprintf("%s %d", where, len(texts)))
	}
	slices.Sort(counts)
	t.Logf("checked, without the secret: %s", strings.Join(counts, ", "))
}

// logTo returns a JSON logger that adds every line to o under where.
func logTo(o *outputs, where string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(lineWriter{o, where}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lineWriter struct {
	o     *outputs
	where string
}

func (w lineWriter) Write(p []byte) (int, error) { w.o.add(w.where, string(p)); return len(p), nil }

// failingStore is a memory store behind a sluicetest.FlakyStore that fails every call.
func failingStore(t *testing.T) *sluicetest.FlakyStore {
	mem, err := memory.New(memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	f := sluicetest.NewFlakyStore(mem)
	f.SetFailing(true)
	return f
}

// deadRedis is the URL of a Redis nothing listens on.
func deadRedis(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return "redis://" + lis.Addr().String() + "/0"
}

// tooLong is a key over the stores' default maximum (1 KiB) holding the secret.
func tooLong(secret string) string {
	return strings.Repeat(secret, sluice.DefaultMaxKeyLength/len(secret)+1)
}

var rule = sluice.FixedWindow(5, time.Minute)

// TestLibraryDoor: Limiter errors (a failing store, every call, budget reservations too; an
// invalid key; a commit of a reservation not open) never quote the key.
func TestLibraryDoor(t *testing.T) {
	secret := newSecret()
	var out outputs
	ctx := context.Background()
	flaky := failingStore(t)
	mem, err := memory.New(memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	leases := map[*sluice.Limiter]*sluice.Leases{sluice.New(flaky): sluice.NewLeases(flaky), sluice.New(mem): sluice.NewLeases(mem)}
	for l, ls := range leases {
		defer ls.Close()
		for _, key := range []string{secret, tooLong(secret)} {
			_, err1 := l.Allow(ctx, key, rule)
			_, err2 := l.AllowAll(ctx, []sluice.Check{{Key: "plain", Rule: rule}, {Key: key, Rule: rule}})
			_, err3 := l.AllowAll(ctx, []sluice.Check{{Key: key, Rule: rule}})
			_, err4 := l.Settle(ctx, key, rule, 3)
			_, err5 := l.Peek(ctx, key, rule)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
			err6 := l.Wait(wctx, key, rule)
			cancel()
			_, err7 := ls.Acquire(ctx, key, sluice.InFlight{Limit: 2})
			budget := sluice.Budget{Rule: rule}
			r, err8 := l.Reserve(ctx, key, budget, 2)
			_, err9 := l.ReserveAll(ctx, []sluice.Hold{{Key: "plain", Budget: budget, N: 1}, {Key: key, Budget: budget, N: 1}})
			_, err10 := r.Commit(ctx, 1)
			gone := l.Resume(sluice.NewReservationID(), key, budget)
			_, err11 := gone.Commit(ctx, 1) // not open
			for _, err := range []error{err1, err2, err3, err4, err5, err6, err7, err8, err9, err10, err11} {
				if err != nil {
					out.add("library error", err.Error())
				}
			}
		}
	}
	out.check(t, secret, "library error")
	out.heard(t, "library error", "no such reservation")
}

// TestHTTPMiddlewareDoor: the httplimit middleware keyed by a header, a query parameter and a
// raw key function, with a token budget (WithLLM) on the header whose request bodies hold the
// secret too, under a failing store (fail closed: the answer is a 503) and with a key the
// store refuses: answers, headers and logs.
func TestHTTPMiddlewareDoor(t *testing.T) {
	secret := newSecret()
	var out outputs
	limits := httplimit.WithLimits(
		httplimit.Limit{Name: "per-key", Rule: rule, Key: httplimit.KeyHeader("X-Api-Key")},
		httplimit.Limit{Name: "per-query", Rule: rule, Key: httplimit.KeyFunc(func(r *http.Request) (string, bool) {
			v := r.URL.Query().Get("api_key")
			return v, v != ""
		})},
		httplimit.Limit{Name: "raw", Rule: rule, Key: httplimit.KeyFunc(func(r *http.Request) (string, bool) {
			v := r.Header.Get("X-Raw")
			return v, v != ""
		})},
		httplimit.Limit{Name: "tokens", Rule: sluice.FixedWindow(10_000, time.Minute), Key: httplimit.KeyHeader("X-Api-Key"), Budget: &sluice.Budget{}},
	)
	mem, err := memory.New(memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for name, l := range map[string]*sluice.Limiter{"failing": sluice.New(failingStore(t)), "working": sluice.New(mem)} {
		mw, err := httplimit.New(l, limits, httplimit.WithLogger(logTo(&out, "httplimit log")), httplimit.WithFailurePolicy(distributed.FailClosed),
			httplimit.WithLLM(httplimit.LLM{}))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
		for _, h := range [][2]string{{"X-Api-Key", secret}, {"X-Api-Key", tooLong(secret)}, {"X-Raw", secret}, {"X-Raw", tooLong(secret)}} {
			for i := range 6 { // past the limit of 5 too, on the working store
				// the budget's estimate is read from the body: a model and a max_tokens of the
				// secret (not a number) once
				body := `{"model":"` + secret + `","max_tokens":10}`
				if i == 0 {
					body = `{"model":"gpt-4o","max_tokens":"` + secret + `"}`
				}
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/items?api_key="+secret, strings.NewReader(body))
				req.Header.Set(h[0], h[1])
				answer(t, &out, "httplimit "+name+" answer", req)
			}
		}
		srv.Close()
	}
	out.check(t, secret, "httplimit log", "httplimit failing answer", "httplimit working answer")
	out.heard(t, "httplimit working answer", "cost cannot be estimated: budget: bad request: max_tokens")
}

// answer sends req and adds its status line, headers and body to out under where.
func answer(t *testing.T, out *outputs, where string, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", resp.Status)
	_ = resp.Header.Write(&b)
	b.Write(body)
	out.add(where, b.String())
	return resp.StatusCode
}

// TestGRPCInterceptorDoor: the grpclimit interceptor keyed by metadata, a rate limit and a
// budget (spent after three calls), under a failing store (fail closed: UNAVAILABLE), with a
// key the store refuses (INVALID_ARGUMENT), and on a working store past the limit
// (RESOURCE_EXHAUSTED, whose QuotaFailure named the store key): status messages, details and
// logs.
func TestGRPCInterceptorDoor(t *testing.T) {
	secret := newSecret()
	var out outputs
	mem, err := memory.New(memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for name, l := range map[string]*sluice.Limiter{"failing": sluice.New(failingStore(t)), "working": sluice.New(mem)} {
		in, err := grpclimit.New(l, []grpclimit.Route{{Limits: []grpclimit.Limit{{Name: "per-key", Rule: rule, Key: grpclimit.KeyMetadata("x-api-key")},
			{Name: "budget", Rule: sluice.FixedWindow(3, time.Minute), Key: grpclimit.KeyMetadata("x-api-key"), Budget: &sluice.Budget{Mode: sluice.Strict}}}}},
			grpclimit.WithLogger(logTo(&out, "grpclimit log")), grpclimit.WithFailurePolicy(distributed.FailClosed))
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(grpc.ChainUnaryInterceptor(in.Unary()))
		healthpb.RegisterHealthServer(srv, health.NewServer())
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = srv.Serve(lis) }()
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		client := healthpb.NewHealthClient(conn)
		for _, key := range []string{secret, tooLong(secret)} {
			for range 6 {
				ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
				var header metadata.MD
				_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
				out.add("grpclimit "+name+" answer", fmt.Sprint(header))
				if err != nil {
					st := status.Convert(err)
					out.add("grpclimit "+name+" answer", prototext.Format(st.Proto())) // message and every detail
				}
			}
		}
		conn.Close()
		srv.Stop()
	}
	out.check(t, secret, "grpclimit failing answer", "grpclimit working answer")
	out.heard(t, "grpclimit working answer", "rate limit exceeded (budget)")
}

// traced starts tracing every span to an OTLP receiver of the test.
func traced(t *testing.T) (*tracing.Provider, *otlptest.Receiver) {
	rcv := otlptest.NewReceiver(t)
	tp, err := tracing.Start(context.Background(), tracing.Config{ServiceName: "doors", SamplingRate: 1, Endpoint: rcv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return tp, rcv
}

// addSpans flushes tp's spans, adds each to out and fails the test when the receiver got the
// secret in any byte.
func addSpans(t *testing.T, tp *tracing.Provider, rcv *otlptest.Receiver, out *outputs, secret string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil { // flushes every span
		t.Fatal(err)
	}
	for _, s := range rcv.Spans() {
		out.add("span", fmt.Sprintf("%s %s %v", s.Name, s.StatusCode, s.Attributes))
	}
	if rcv.Received([]byte(secret)) {
		t.Errorf("the OTLP collector received the request's value %q", secret)
	}
}

// serve runs a sluice serve of cfg with rules on loopback ports until the test ends.
func serve(t *testing.T, rules string, cfg server.Config) *server.Server {
	doc, err := config.Decode("rules.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rules, err = config.Compile(doc); err != nil {
		t.Fatal(err)
	}
	cfg.ReloadInterval, cfg.GRPCAddr, cfg.HTTPAddr = -1, "127.0.0.1:0", "127.0.0.1:0"
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv
}

const serveRules = `
domain: doors
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 5}
`

// TestServeDoor: sluice serve's gRPC RLS, /json and HTTP API (the key form and the descriptor
// form, allow and settle; the budgets' reserve, commit and cancel, the secret in a reservation
// id and a mode too), traced, on a Redis that does not answer (no fallback: UNAVAILABLE
// and 503), and with a value holding a control character and a key too long: answers, logs,
// every byte the OTLP collector received, and the metrics page.
func TestServeDoor(t *testing.T) {
	secret := newSecret()
	var out outputs
	tp, rcv := traced(t)
	srv := serve(t, serveRules, server.Config{Config: rls.Config{Logger: logTo(&out, "serve log"),
		StoreConfig: store.Config{Backend: store.Backend{URL: deadRedis(t), Timeout: 200 * time.Millisecond}}}, TracerProvider: tp})
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	base := "http://" + srv.HTTPAddr()
	for _, value := range []string{secret, secret + "\x01", tooLong(secret)} {
		req := &rlsv3.RateLimitRequest{Domain: "doors", Descriptors: []*rlcommon.RateLimitDescriptor{{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "api_key", Value: value}}}}}
		resp, err := client.ShouldRateLimit(context.Background(), req)
		out.add("serve gRPC answer", prototext.Format(resp))
		if err != nil {
			out.add("serve gRPC answer", prototext.Format(status.Convert(err).Proto()))
		}
		jsonValue := strings.ReplaceAll(value, "\x01", `\u0001`)
		descriptors := `{"domain":"doors","descriptors":[{"entries":[{"key":"api_key","value":"` + jsonValue + `"}]}]}`
		for path, body := range map[string]string{
			"/json":        descriptors,
			"/v1/allow":    descriptors,
			"/v1/allow ":   `{"key":"` + jsonValue + `","rule":{"algorithm":"fixed_window","limit":5,"period":"1m"}}`,
			"/v1/settle":   `{"key":"` + jsonValue + `","rule":{"algorithm":"fixed_window","limit":5,"period":"1m"},"delta":2}`,
			"/v1/reserve":  `{"key":"` + jsonValue + `","rule":{"algorithm":"fixed_window","limit":5,"period":"1m"},"estimate":2}`,
			"/v1/commit":   `{"key":"` + jsonValue + `","rule":{"algorithm":"fixed_window","limit":5,"period":"1m"},"id":"0123456789abcdef0123456789abcdef","actual":1}`,
			"/v1/cancel":   `{"key":"` + jsonValue + `","rule":{"algorithm":"fixed_window","limit":5,"period":"1m"},"id":"` + jsonValue + `"}`,
			"/v1/reserve ": `{"key":"k","rule":{"algorithm":"fixed_window","limit":5,"period":"1m"},"estimate":2,"mode":"` + jsonValue + `"}`,
		} {
			req, _ := http.NewRequest(http.MethodPost, base+strings.TrimSpace(path), strings.NewReader(body))
			req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			answer(t, &out, "serve HTTP answer", req)
		}
	}
	for _, page := range []string{"/metrics", "/v1/top", "/ui", "/rlconfig"} {
		req, _ := http.NewRequest(http.MethodGet, base+page, nil)
		answer(t, &out, "serve page", req)
	}
	addSpans(t, tp, rcv, &out, secret)
	out.check(t, secret, "serve gRPC answer", "serve HTTP answer", "serve log", "span")
	out.heard(t, "serve HTTP answer", "id: want 32 hexadecimal characters")
}

// proxyRules serve sluice proxy and the gateways' doors (TestGatewayDoors), where an Envoy
// route's context extension adds a tenant. The proxy's budgets follow (proxyBudgets).
const proxyRules = `
domain: doors
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 5}
proxy:
  rate_limits:
    - actions:
        - request_headers: {header_name: X-Api-Key, descriptor_key: api_key}
`

// proxyBudgets are the budgets of TestProxyDoor, after proxyRules: a dollar budget keyed by
// the API key, its price table beside the rules.
const proxyBudgets = `  budgets:
    - name: dollars
      actions: [{request_headers: {header_name: X-Api-Key, descriptor_key: api_key}}]
      rate_limit: {unit: minute, requests_per_unit: 1000000}
      prices: prices.yaml
`

// TestProxyDoor: sluice proxy keyed by a header, with a dollar budget on it, the API key in
// the query and in request bodies as well (a model, a max_tokens, a body that is not JSON), on
// a Redis that does not answer (no fallback: 503) and with a header value too long for the
// store (400): answers, logs and the admin metrics page.
func TestProxyDoor(t *testing.T) {
	secret := newSecret()
	var out outputs
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(proxyRules+proxyBudgets), 0o644); err != nil {
		t.Fatal(err)
	}
	prices := "models:\n  gpt-4o: {input: 2.5, output: 10}\n"
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "prices.yaml"), []byte(prices), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := proxy.New(proxy.Config{Upstream: up.URL, Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", RulesPath: path, ReloadInterval: -1,
		StoreConfig: store.Config{Backend: store.Backend{URL: deadRedis(t), Timeout: 200 * time.Millisecond}}, Logger: logTo(&out, "proxy log")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	for _, value := range []string{secret, tooLong(secret)} {
		// the budget's estimate reads the body: a model the price table does not list, a
		// max_tokens that is no number, a body that is no JSON, each the secret
		for _, body := range []string{`{"model":"gpt-4o","max_tokens":10}`, `{"model":"` + secret + `","max_tokens":10}`,
			`{"model":"gpt-4o","max_tokens":"` + secret + `"}`, `{"model":"gpt-4o",` + secret + `}`} {
			req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr()+"/items?api_key="+secret, strings.NewReader(body))
			req.Header.Set("X-Api-Key", value)
			answer(t, &out, "proxy answer", req)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.AdminAddr()+"/metrics", nil)
	answer(t, &out, "proxy page", req)
	testenv.Eventually(t, 5*time.Second, "the store error logged", func() bool {
		out.mu.Lock()
		defer out.mu.Unlock()
		return strings.Contains(strings.Join(out.texts["proxy log"], ""), "store error")
	})
	out.check(t, secret, "proxy answer", "proxy log", "proxy page")
	for _, want := range []string{"not in the price table", "max_tokens: want a whole number", "body: not JSON"} {
		out.heard(t, "proxy answer", want)
	}
}

// heard fails the test when no text of o under where holds want: the door's path that writes
// it was not driven.
func (o *outputs) heard(t *testing.T, where, want string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if !strings.Contains(strings.Join(o.texts[where], "\n"), want) {
		t.Errorf("%s: no %q: the path was not driven", where, want)
	}
}

// TestGatewayDoors (issue 35): sluice serve's forward-auth door (NGINX, Caddy, Traefik) and
// Envoy's ext_authz over HTTP and gRPC, the API key in a header, in the forwarded URI's query,
// in the path Envoy passes and in a per-route context extension, on a Redis that does not
// answer (no fallback: 503 and UNAVAILABLE), on a working store past the limit (429 and its
// problem), with a value too long for the store and a control character (400), and with a
// forwarded URI holding the key that does not parse (400): answers (statuses, headers,
// bodies, the CheckResponses whole), logs, spans and the metrics page.
func TestGatewayDoors(t *testing.T) {
	secret := newSecret()
	var out outputs
	tp, rcv := traced(t)
	for name, backend := range map[string]store.Backend{"failing": {URL: deadRedis(t), Timeout: 200 * time.Millisecond}, "working": {URL: "memory://"}} {
		srv := serve(t, proxyRules, server.Config{Config: rls.Config{Logger: logTo(&out, "serve log"), StoreConfig: store.Config{Backend: backend}},
			TracerProvider: tp, TrustedProxies: []string{"127.0.0.1"}})
		conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		authz := authv3.NewAuthorizationClient(conn)
		base := "http://" + srv.HTTPAddr()
		for _, value := range []string{secret, secret + "\x01" + secret, tooLong(secret)} {
			for range 6 { // past the limit of 5 too, on the working store
				headerValue := strings.ReplaceAll(value, "\x01", "\t") // the control character net/http sends (inside the value: trimmed at its ends)
				req, _ := http.NewRequest(http.MethodGet, base+"/v1/forward-auth/doors", nil)
				req.Header.Set("X-Forwarded-Method", "GET")
				req.Header.Set("X-Forwarded-Uri", "/items?api_key="+secret)
				req.Header.Set("X-Api-Key", headerValue)
				answer(t, &out, "forward-auth "+name+" answer", req)
				req, _ = http.NewRequest(http.MethodGet, base+"/v1/ext-authz/doors/items?api_key="+secret, nil)
				req.Header.Set("X-Api-Key", headerValue)
				answer(t, &out, "ext_authz HTTP "+name+" answer", req)
				resp, err := authz.Check(context.Background(), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
					Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Path: "/items?api_key=" + secret,
						Host: "example.com", Scheme: "http", Headers: map[string]string{"x-api-key": value}}},
					ContextExtensions: map[string]string{"domain": "doors", "tenant": value}}})
				out.add("ext_authz gRPC "+name+" answer", prototext.Format(resp))
				if err != nil {
					out.add("ext_authz gRPC "+name+" answer", prototext.Format(status.Convert(err).Proto()))
				}
			}
		}
		// A forwarded URI that does not parse, holding the key.
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/forward-auth/doors", nil)
		req.Header.Set("X-Forwarded-Method", "GET")
		req.Header.Set("X-Forwarded-Uri", "items?api_key="+secret)
		answer(t, &out, "forward-auth "+name+" answer", req)
		resp, err := authz.Check(context.Background(), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
			Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Path: "items?api_key=" + secret}}}})
		out.add("ext_authz gRPC "+name+" answer", prototext.Format(resp))
		if err != nil {
			out.add("ext_authz gRPC "+name+" answer", prototext.Format(status.Convert(err).Proto()))
		}
		req, _ = http.NewRequest(http.MethodGet, base+"/metrics", nil)
		answer(t, &out, "serve page", req)
		conn.Close()
	}
	addSpans(t, tp, rcv, &out, secret)
	out.check(t, secret, "forward-auth failing answer", "forward-auth working answer", "ext_authz HTTP failing answer",
		"ext_authz HTTP working answer", "ext_authz gRPC failing answer", "ext_authz gRPC working answer", "serve log")
}
