package main

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/testenv"
)

// peerRuntime copies the peer's integration runtime directory (testdata) to a temporary
// directory, so a test can change it, and returns its RUNTIME_ROOT.
func peerRuntime(t *testing.T) string {
	t.Helper()
	src := "testdata/envoyproxy-ratelimit/runtime"
	dst := filepath.Join(t.TempDir(), "runtime")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, "current")
}

// peerOnlyEnv is the environment of the peer's integration tests (defaultSettings and
// makeSimpleRedisSettings in test/integration/integration_test.go), with ports of the
// kernel's choosing and JSON logs: nothing but envoyproxy/ratelimit's own variables.
func peerOnlyEnv(root string, extra ...string) []string {
	return append([]string{"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=config",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"USE_STATSD=false", "USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0", "LOG_FORMAT=json", "LOG_LEVEL=debug"}, extra...)
}

// peerEnvStores runs f with the peer's variables selecting each store: none (Sluice's memory
// store), and the Redis of SLUICE_REDIS_ADDR as the peer's tests set it (tcp, REDIS_URL),
// under a CACHE_KEY_PREFIX of its own.
func peerEnvStores(t *testing.T, f func(t *testing.T, storeEnv []string)) {
	t.Run("memory", func(t *testing.T) { f(t, nil) })
	t.Run("redis", func(t *testing.T) {
		addr := testenv.RedisAddr(t)
		f(t, []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + addr, "REDIS_TIMEOUT=2s", "CACHE_KEY_PREFIX=sluice-peer-" + uniq() + ":"})
	})
}

// runPeerBasicBase replays testBasicBaseConfig's answers on the peer's basic and another
// domains (test/integration/integration_test.go), whether the rules come from its runtime
// directory or from xDS (source_test.go).
func runPeerBasicBase(t *testing.T, s *served) {
	t.Helper()
	r := rand.Int64()
	runPeerCases(t, s, "grpc", []peerCase{
		{"an unknown domain", rlReq("foo", 1, []string{"hello", "world"}), "OK; OK rem=0"},
		{"basic key1", rlReq("basic", 1, []string{"key1", "foo"}), "OK; OK 50/SECOND rem=49"},
	})
	for i := range 25 {
		want := fmt.Sprintf("OK; OK 20/MINUTE rem=%d", 20-(i+1))
		if i >= 20 {
			want = "OVER_LIMIT; OVER_LIMIT 20/MINUTE rem=0"
		}
		runPeerCases(t, s, "grpc", []peerCase{{fmt.Sprintf("another key2 #%d", i), rlReq("another", 1, []string{"key2", fmt.Sprint(r)}), want}})
	}
	r = rand.Int64()
	for i := range 15 {
		want := fmt.Sprintf("OK; OK 20/MINUTE rem=%d; OK 10/HOUR rem=%d", 20-(i+1), 10-(i+1))
		if i >= 10 {
			// Deliberate difference (envoyproxy/ratelimit #427): a request over one limit
			// consumes nothing, so key2 stays at 10 remaining; the peer counts it and
			// answers rem=20-(i+1), unless STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, whose
			// answer (rem=10) this is.
			want = "OVER_LIMIT; OK 20/MINUTE rem=10; OVER_LIMIT 10/HOUR rem=0"
		}
		runPeerCases(t, s, "grpc", []peerCase{{fmt.Sprintf("another key2 and key3 #%d", i),
			rlReq("another", 1, []string{"key2", fmt.Sprint(r)}, []string{"key3", fmt.Sprint(r)}), want}})
	}
}

// TestPeerIntegration starts sluice serve with only envoyproxy/ratelimit's environment
// variables and its runtime directory layout, serving the peer's integration configs
// unchanged, and replays testBasicBaseConfig and testShareThreshold
// (test/integration/integration_test.go).
func TestPeerIntegration(t *testing.T) {
	peerEnvStores(t, func(t *testing.T, storeEnv []string) {
		s := startServe(t, peerOnlyEnv(peerRuntime(t), storeEnv...))
		runPeerBasicBase(t, s)
		// Deliberate difference: under the sliding window (Sluice's default algorithm),
		// duration_until_reset is the time until the key is back to its full limit, up to two
		// periods; the peer's fixed windows reset within one (TestPeerFixedWindowSwitch).
		resp := s.ask(t, "grpc", rlReq("another", 1, []string{"key4", "durTest"}))
		if d := resp.Statuses[0].DurationUntilReset; d.GetSeconds() <= 0 || d.GetSeconds() > 2*86400 || d.GetNanos() != 0 {
			t.Errorf("key4 (1 day): duration_until_reset %v, want whole seconds within two days", d.AsDuration())
		}
		// testShareThreshold: every value under files/* shares one counter of 10 an hour.
		for range 10 {
			s.ask(t, "grpc", rlReq("share-threshold-test", 1, []string{"files", "files/a.pdf"}))
		}
		runPeerCases(t, s, "json", []peerCase{
			{"files/b.csv shares files/a.pdf's counter", rlReq("share-threshold-test", 1, []string{"files", "files/b.csv"}),
				"OVER_LIMIT; OVER_LIMIT 10/HOUR rem=0"},
			{"files_no_share/* does not share", rlReq("share-threshold-test", 1, []string{"files_no_share", fmt.Sprintf("files_no_share/%d", rand.Int64())}),
				"OK; OK 10/HOUR rem=9"},
		})
		// testBasicBaseConfig's counters, with the peer's names and labels.
		s.checkSeries(t,
			`ratelimit_service_rate_limit_total_hits{domain="basic",key1="key1",key2=""} 1`,
			`ratelimit_service_rate_limit_total_hits{domain="another",key1="key2",key2=""} 40`,
			`ratelimit_service_rate_limit_over_limit{domain="another",key1="key2",key2=""} 5`,
			`ratelimit_service_rate_limit_total_hits{domain="another",key1="key3",key2=""} 15`,
			`ratelimit_service_rate_limit_over_limit{domain="another",key1="key3",key2=""} 5`,
			`ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 53`,
			`ratelimit_service_config_load_success 1`,
		)
		// The peer's listeners: PROMETHEUS_ADDR serves the metrics, DEBUG_PORT /rlconfig.
		if code, body := s.get(t, s.metrics, "/metrics"); code != 200 || !strings.Contains(body, "ratelimit_service_rate_limit_total_hits") {
			t.Errorf("PROMETHEUS_ADDR /metrics: %d", code)
		}
		if code, body := s.get(t, s.debugAddr, "/rlconfig"); code != 200 || !strings.Contains(body, "basic.key1: unit=SECOND requests_per_unit=50") {
			t.Errorf("DEBUG_PORT /rlconfig: %d %q", code, body)
		}
		if code, body := s.get(t, s.httpAddr, "/healthcheck"); code != 200 || body != "OK" {
			t.Errorf("/healthcheck: %d %q", code, body)
		}
		h, err := healthpb.NewHealthClient(s.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "ratelimit"})
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("gRPC health ratelimit: %v %v", h, err)
		}
	})
}

// TestPeerCheckRuntime: check-config reads the peer's runtime directory as serve does.
func TestPeerCheckRuntime(t *testing.T) {
	var out, errOut strings.Builder
	dir := filepath.Join(peerRuntime(t), "ratelimit", "config")
	if code := run([]string{"check-config", "--config-tree", "--merge-domains", dir}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "3 domain(s) [another basic share-threshold-test]") {
		t.Errorf("exit %d: %s%s", code, out.String(), errOut.String())
	}
}

// TestPeerIntegrationReload ports testConfigReload: a file added to the runtime directory is
// served after a reload, one removed is dropped; the reload.yaml it adds has README example
// 3's block (requests_per_unit: 0). Sluice polls the files (SLUICE_RELOAD_INTERVAL, default
// 5s) where the peer is told of changes by the file system.
func TestPeerIntegrationReload(t *testing.T) {
	root := peerRuntime(t)
	s := startServe(t, peerOnlyEnv(root))
	block := rlReq("reload", 1, []string{"block", "foo"})
	runPeerCases(t, s, "grpc", []peerCase{{"before the reload, the domain is unknown", block, "OK; OK rem=0"}})
	added := filepath.Join(root, "ratelimit", "config", "reload.yaml")
	b, err := os.ReadFile(filepath.Join(root, "ratelimit", "reload.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(added, b, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, block, "OVER_LIMIT; OVER_LIMIT 0/SECOND rem=0")
	runPeerCases(t, s, "grpc", []peerCase{{"the reloaded key1", rlReq("reload", 1, []string{"key1", "foo"}), "OK; OK 50/SECOND rem=49"}})
	if err := os.Remove(added); err != nil {
		t.Fatal(err)
	}
	waitFor(t, s, block, "OK; OK rem=0")
	s.checkSeries(t, `ratelimit_service_config_load_success 3`)
}

// waitFor asks req until the answer is want (a reload has happened), for up to 20 s.
func waitFor(t *testing.T, s *served, req *rlsv3.RateLimitRequest, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := peerSummary(s.ask(t, "grpc", req))
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reload: %s, want %s", got, want)
		}
		time.Sleep(100 * time.Millisecond) // polling a child process; no clock to advance
	}
}

// TestPeerFixedWindowSwitch: --default-algorithm fixed_window gives the peer's clock-aligned
// windows: duration_until_reset is the time to the end of the unit's window
// (utils.CalculateReset: unit - now % unit, in whole seconds), and a window's count starts
// again at its end.
func TestPeerFixedWindowSwitch(t *testing.T) {
	s := startServe(t, peerOnlyEnv(peerRuntime(t)), "--default-algorithm", "fixed_window")
	for _, c := range []struct {
		key  string
		unit int64
	}{{"key2", 60}, {"key3", 3600}, {"key4", 86400}} {
		before := time.Now().Unix()
		resp := s.ask(t, "grpc", rlReq("another", 1, []string{c.key, uniq()}))
		after := time.Now().Unix()
		got := resp.Statuses[0].DurationUntilReset.GetSeconds()
		if lo, hi := c.unit-after%c.unit, c.unit-before%c.unit; (got < lo || got > hi) && !(before/c.unit != after/c.unit) {
			t.Errorf("%s: duration_until_reset %ds, want %d..%d (the peer's)", c.key, got, lo, hi)
		}
	}
}

// TestPeerCountDenied: --count-denied restores what envoyproxy/ratelimit does with the hits
// of a request over a limit (it counts them, each descriptor on its own: #427); with
// --default-algorithm fixed_window, testBasicBaseConfig's two-descriptor loop gets the peer's
// exact answers, key2 counting on while key3 is over its limit.
func TestPeerCountDenied(t *testing.T) {
	peerEnvStores(t, func(t *testing.T, storeEnv []string) {
		s := startServe(t, peerOnlyEnv(peerRuntime(t), storeEnv...), "--count-denied", "--default-algorithm", "fixed_window")
		for attempt := 0; ; attempt++ {
			start, r := time.Now().Unix()/60, rand.Int64()
			var got, want []string
			for i := range 15 {
				w := fmt.Sprintf("OK; OK 20/MINUTE rem=%d; OK 10/HOUR rem=%d", 20-(i+1), 10-(i+1))
				if i >= 10 {
					w = fmt.Sprintf("OVER_LIMIT; OK 20/MINUTE rem=%d; OVER_LIMIT 10/HOUR rem=0", 20-(i+1))
				}
				want = append(want, w)
				got = append(got, peerSummary(s.ask(t, "grpc", rlReq("another", 1, []string{"key2", fmt.Sprint(r)}, []string{"key3", fmt.Sprint(r)}))))
			}
			if time.Now().Unix()/60 != start && attempt == 0 {
				continue // key2's minute window ended during the loop: once more, in the next one
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("#%d:\n got  %s\n want %s", i, got[i], want[i])
				}
			}
			break
		}
		// A request over its limit was counted: the next one is over too, as in the peer.
		runPeerCases(t, s, "grpc", []peerCase{
			{"25 hits on 20 a minute", rlReq("another", 25, []string{"key2", "burst"}), "OVER_LIMIT; OVER_LIMIT 20/MINUTE rem=0"},
			{"counted: over at once", rlReq("another", 1, []string{"key2", "burst"}), "OVER_LIMIT; OVER_LIMIT 20/MINUTE rem=0"},
		})
	})
}
