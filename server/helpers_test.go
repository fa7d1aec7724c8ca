package server_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

type harness struct {
	srv    *server.Server
	store  *sluicetest.CountingStore
	clock  *sluicetest.ManualClock
	client rlsv3.RateLimitServiceClient
	conn   *grpc.ClientConn
	base   string // http://host:port
	stop   func()
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// start runs a server on 127.0.0.1:0 with rules (YAML text, or a path when rulesPath is set)
// over a memory store on a manual clock.
func start(t *testing.T, rules string, mutate ...func(*server.Config)) *harness {
	t.Helper()
	clock := sluicetest.NewManualClock(t0)
	mem, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	h := &harness{store: &sluicetest.CountingStore{Store: mem}, clock: clock}
	cfg := server.Config{Config: rls.Config{Store: h.store, ReloadInterval: -1}, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}
	if rules != "" {
		cfg.Rules = compile(t, rules)
	}
	for _, m := range mutate {
		m(&cfg)
	}
	return h.run(t, cfg)
}

func (h *harness) run(t *testing.T, cfg server.Config) *harness {
	t.Helper()
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h.srv, h.conn, h.client = srv, conn, rlsv3.NewRateLimitServiceClient(conn)
	h.base = "http://" + srv.HTTPAddr()
	stopped := false
	h.stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	}
	t.Cleanup(h.stop)
	return h
}

func compile(t testing.TB, rules string) *config.Config { return testenv.Rules(t, rules) }

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// desc builds a descriptor from alternating keys and values.
func desc(kv ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (h *harness) ask(t *testing.T, domain string, descs ...*rlcommon.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (h *harness) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(h.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metric returns the line of the metrics page that starts with prefix, or "".
func (h *harness) metric(t *testing.T, prefix string) string {
	for _, line := range strings.Split(h.metrics(t), "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

type serverConfig = server.Config

// startReal runs a server with a store opened from a URL (real clock), for load and
// multi-instance tests.
func startReal(t *testing.T, rules, storeURL string) *server.Server {
	t.Helper()
	return startRealStore(t, rules, store.Config{Backend: store.Backend{URL: storeURL}})
}

// startRealStore is startReal on the store sc describes.
func startRealStore(t *testing.T, rules string, sc store.Config) *server.Server {
	t.Helper()
	h := &harness{}
	cfg := server.Config{Config: rls.Config{Rules: compile(t, rules), StoreConfig: sc, ReloadInterval: -1}, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}
	return h.run(t, cfg).srv
}

func redisConfig(t *testing.T, url string) server.Config {
	return server.Config{Config: rls.Config{Rules: compile(t, sharedRules), StoreConfig: store.Config{Backend: store.Backend{URL: url, Timeout: 5 * time.Second}}, ReloadInterval: -1}, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}
}

func randomSuffix() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// post sends body to path and returns the status and the answer's text.
func (h *harness) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(h.base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
