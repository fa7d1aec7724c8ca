package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// statsdListener collects the statsd lines sent to a UDP socket on 127.0.0.1.
type statsdListener struct {
	conn  net.PacketConn
	mu    sync.Mutex
	lines []string
}

func listenStatsd(t *testing.T) *statsdListener {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &statsdListener{conn: conn}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			l.mu.Lock()
			l.lines = append(l.lines, strings.Split(strings.TrimSpace(string(buf[:n])), "\n")...)
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *statsdListener) port() string {
	_, p, _ := net.SplitHostPort(l.conn.LocalAddr().String())
	return p
}

// sum adds up the values of the counter lines of stat name ("name:3|c").
func (l *statsdListener) sum(name string) (total int, seen bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		n, rest, ok := strings.Cut(line, ":")
		if !ok || n != name || !strings.HasSuffix(rest, "|c") {
			continue
		}
		var v int
		for _, c := range strings.TrimSuffix(rest, "|c") {
			v = v*10 + int(c-'0')
		}
		total, seen = total+v, true
	}
	return total, seen
}

func (l *statsdListener) has(prefix string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// waitStat waits until the counter name adds up to want.
func (l *statsdListener) waitStat(t *testing.T, name string, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, _ := l.sum(name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("statsd %s: %d, want %d; lines %q", name, got, want, l.lines)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPeerStatsd: with the peer's statsd variables, serve sends the peer's stat names
// (src/stats/manager_impl.go, src/metrics) to STATSD_HOST:STATSD_PORT every
// STATS_FLUSH_INTERVAL, each with the EXTRA_TAGS.
func TestPeerStatsd(t *testing.T) {
	l := listenStatsd(t)
	s := startServe(t, peerOnlyEnv(peerRuntime(t), "USE_STATSD=true", "STATSD_HOST=127.0.0.1", "STATSD_PORT="+l.port(),
		"STATSD_PROTOCOL=udp", "STATS_FLUSH_INTERVAL=100ms", "EXTRA_TAGS=cluster:eu"))
	for range 3 {
		s.ask(t, "grpc", rlReq("basic", 1, []string{"key1", "foo"}))
	}
	for range 25 {
		s.ask(t, "grpc", rlReq("another", 1, []string{"key2", "statsd"}))
	}
	const tag = ".__cluster=eu"
	l.waitStat(t, "ratelimit.service.rate_limit.basic.key1.total_hits"+tag, 3)
	l.waitStat(t, "ratelimit.service.rate_limit.basic.key1.within_limit"+tag, 3)
	l.waitStat(t, "ratelimit.service.rate_limit.another.key2.total_hits"+tag, 25)
	l.waitStat(t, "ratelimit.service.rate_limit.another.key2.over_limit"+tag, 5)
	l.waitStat(t, "ratelimit.service.rate_limit.another.key2.near_limit"+tag, 4) // past 0.8 x 20: hits 17 to 20
	l.waitStat(t, "ratelimit.service.config_load_success"+tag, 1)
	l.waitStat(t, "ratelimit_server.ShouldRateLimit.total_requests"+tag, 28)
	if !l.has("ratelimit_server.ShouldRateLimit.response_time" + tag + ":") {
		t.Errorf("no response_time timer lines")
	}
}

// TestPeerMapperYAML: with PROMETHEUS_MAPPER_YAML, PROMETHEUS_ADDR serves the series the
// mapping file makes of the peer's stats, in place of the default mapping's; /metrics on the
// HTTP port keeps Sluice's own.
func TestPeerMapperYAML(t *testing.T) {
	mapping := filepath.Join(t.TempDir(), "mapping.yaml")
	err := os.WriteFile(mapping, []byte(`mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "rl_hits"
    labels:
      domain: "$1"
      descriptor: "$2"
  - match: "ratelimit.service.config_load_success"
    name: "rl_config_loads"
    match_metric_type: counter
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, peerOnlyEnv(peerRuntime(t), "PROMETHEUS_MAPPER_YAML="+mapping, "STATS_FLUSH_INTERVAL=100ms"))
	for range 2 {
		s.ask(t, "grpc", rlReq("basic", 1, []string{"key1", "foo"}))
	}
	want := []string{`rl_hits{descriptor="key1",domain="basic"} 2`, `rl_config_loads 1`}
	deadline := time.Now().Add(20 * time.Second)
	var body string
	for {
		_, body = s.get(t, s.metrics, "/metrics")
		if strings.Contains(body, "\n"+want[0]+"\n") && strings.Contains(body, "\n"+want[1]+"\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PROMETHEUS_ADDR lacks %q:\n%s", want, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(body, "ratelimit_service_rate_limit_total_hits{") {
		t.Errorf("PROMETHEUS_ADDR serves the default mapping's series beside the mapping file's")
	}
	s.checkSeries(t, `ratelimit_service_rate_limit_total_hits{domain="basic",key1="key1",key2=""} 2`)
}

// TestPeerGRPCUDS: GRPC_UDS makes RLS listen on a Unix socket instead of GRPC_HOST:GRPC_PORT.
func TestPeerGRPCUDS(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "rl.sock")
	s := startServe(t, peerOnlyEnv(peerRuntime(t), "GRPC_UDS="+sock))
	if s.grpcAddr != sock {
		t.Fatalf("gRPC listens on %q, want the socket %s", s.grpcAddr, sock)
	}
	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, rlReq("basic", 1, []string{"key1", "uds"}))
	if err != nil || peerSummary(resp) != "OK; OK 50/SECOND rem=49" {
		t.Fatalf("over the socket: %v, %v", resp, err)
	}
}

// TestPeerMemcacheSRV: MEMCACHE_SRV names the memcached servers by a DNS SRV record, looked
// up at start and again every MEMCACHE_SRV_REFRESH (--store-srv-refresh); with MEMCACHE_HOST_PORT too, or no servers found, serve refuses to start.
func TestPeerMemcacheSRV(t *testing.T) {
	srv := func(name string) ([]*net.SRV, error) {
		if name != "_memcache._tcp.cache.local" {
			return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
		}
		return []*net.SRV{{Target: "m1.cache.local.", Port: 11211}, {Target: "m2.cache.local.", Port: 11212}}, nil
	}
	e := readPeerEnvSRV(envOf(map[string]string{"BACKEND_TYPE": "memcache", "MEMCACHE_SRV": "_memcache._tcp.cache.local",
		"MEMCACHE_SRV_REFRESH": "10s"}), srv)
	if got := e.defaults["store"]; got != "memcached://m1.cache.local:11211,m2.cache.local:11212" || len(e.flagErrs) != 0 {
		t.Errorf("--store %q, errors %v", got, e.flagErrs)
	}
	if len(e.warnings) != 0 || e.defaults["store-srv-refresh"] != "10s" {
		t.Errorf("warnings %v, --store-srv-refresh %q; want none and 10s (MEMCACHE_SRV_REFRESH honoured)", e.warnings, e.defaults["store-srv-refresh"])
	}
	bad := readPeerEnvSRV(envOf(map[string]string{"BACKEND_TYPE": "memcache", "MEMCACHE_SRV": "_memcache._tcp.cache.local",
		"MEMCACHE_SRV_REFRESH": "often"}), srv)
	if err := bad.flagErrs["store-srv-refresh"]; err == nil || !strings.Contains(err.Error(), "MEMCACHE_SRV_REFRESH") {
		t.Errorf("MEMCACHE_SRV_REFRESH=often: error %v, want one naming it", err)
	}
	for env, want := range map[string]string{
		"MEMCACHE_SRV=_memcache._tcp.cache.local MEMCACHE_HOST_PORT=m:1": "both MEMCACHE_HOST_PORT and MEMCACHE_SRV",
		"MEMCACHE_SRV=_memcache._tcp.nowhere":                            "MEMCACHE_SRV: no servers",
	} {
		m := map[string]string{"BACKEND_TYPE": "memcache"}
		for _, kv := range strings.Fields(env) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		e := readPeerEnvSRV(envOf(m), srv)
		if err := e.flagErrs["store"]; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", env, err, want)
		}
	}
}

// TestServeLogsEnvironment (issue 25 item 7): every setting taken from the environment is
// logged at start-up with its value, secrets masked: by an allow-list since issue 31 (item 3),
// so the xDS headers, which no deny-list of names caught, are masked too.
func TestServeLogsEnvironment(t *testing.T) {
	t.Setenv("REDIS_AUTH", "s3cret-auth")
	t.Setenv("REDIS_URL", "127.0.0.1:6379")
	t.Setenv("SLUICE_STORE", "redis://app:s3cret-url@127.0.0.1:6379/0?password=s3cret-query")
	t.Setenv("SLUICE_QUOTA_STORE", "memory")
	t.Setenv("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "authorization:Bearer s3cret-xds") // issue 31 item 3: printed raw
	t.Setenv("SLUICE_XDS_HEADERS", "x-token=s3cret-sluice-xds")
	t.Setenv("CACHE_KEY_PREFIX", "rl:")
	var buf bytes.Buffer
	f := serveFlags{peer: readPeerEnv(os.LookupEnv)}
	f.logEnv(slog.New(slog.NewTextHandler(&buf, nil)))
	out := buf.String()
	if strings.Contains(out, "s3cret") {
		t.Errorf("a secret is logged:\n%s", out)
	}
	for _, want := range []string{"name=REDIS_AUTH value=xxxxx", "name=REDIS_URL value=127.0.0.1:6379", "name=CACHE_KEY_PREFIX value=rl:",
		"name=SLUICE_QUOTA_STORE value=memory", "name=SLUICE_STORE value=redis://app:xxxxx@127.0.0.1:6379/0?xxxxx",
		"name=CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS value=xxxxx", "name=SLUICE_XDS_HEADERS value=xxxxx"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestServeGenericPort (issue 25 item 7): an inherited PORT alone does not move or widen the
// listener, and says it is ignored; in the peer's environment HOST and PORT apply as the
// peer has them, and the listener on every interface is named in a warning.
func TestServeGenericPort(t *testing.T) {
	t.Run("outside the peer's environment", func(t *testing.T) {
		env := append(withoutPeer(os.Environ()), "PORT=1", "HOST=0.0.0.0", "SLUICE_GRPC_ADDR=127.0.0.1:0", "SLUICE_LOG_FORMAT=json")
		s := startServe(t, env, "--http-addr", "127.0.0.1:0")
		if !strings.HasPrefix(s.httpAddr, "127.0.0.1:") {
			t.Errorf("HTTP on %s", s.httpAddr)
		}
		if !logHas(s, `"msg":"generic variable ignored`, `"name":"PORT"`) {
			t.Errorf("PORT not said to be ignored: %q", s.log())
		}
	})
	t.Run("in the peer's environment", func(t *testing.T) {
		root := peerRuntime(t)
		env := []string{"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0",
			"USE_STATSD=false", "LOG_FORMAT=json"}
		s := startServe(t, env)
		if host, _, _ := net.SplitHostPort(s.httpAddr); host != "::" && host != "0.0.0.0" {
			t.Errorf("HTTP on %s, want every interface as the peer", s.httpAddr)
		}
		if !logHas(s, `"level":"WARN"`, `listening on every interface`) {
			t.Errorf("the wide listener is not named: %q", s.log())
		}
		if !logHas(s, `"msg":"setting from the environment"`, `"name":"PORT","value":"0"`) {
			t.Errorf("PORT not logged: %q", s.log())
		}
	})
}

// withoutPeer drops the peer's variables from env.
func withoutPeer(env []string) []string {
	known := peerVariables()
	var out []string
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !known[name] {
			out = append(out, kv)
		}
	}
	return out
}

func logHas(s *served, parts ...string) bool {
	for _, line := range s.log() {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestPeerResponseDynamicMetadata: with RESPONSE_DYNAMIC_METADATA, each RLS response carries
// the request and the merged metadata of the limits it passed, as the peer's
// ratelimitToMetadata gives them.
func TestPeerResponseDynamicMetadata(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	err := os.WriteFile(rules, []byte(`domain: md
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {team: {name: a}}
  - key: j
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {team: {tier: gold}}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	env := append(withoutPeer(os.Environ()), "RESPONSE_DYNAMIC_METADATA=true", "SLUICE_LOG_FORMAT=json")
	s := startServe(t, env, "--config", rules, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	req := rlReq("md", 1, []string{"k", "x"}, []string{"j", "y"})
	for i, want := range []string{
		`{"descriptors":[{"entries":["k=x"]},{"entries":["j=y"]}],"domain":"md","hitsAddend":1,"metadata":{"team":{"name":"a","tier":"gold"}}}`,
		`{"descriptors":[{"entries":["k=x"]},{"entries":["j=y"]}],"domain":"md","hitsAddend":1,"metadata":{"team":{"tier":"gold"}}}`, // k is over
	} {
		resp := s.ask(t, "grpc", req)
		b, _ := resp.GetDynamicMetadata().MarshalJSON()
		var got, exp any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("request %d: %s: %v", i, b, err)
		}
		_ = json.Unmarshal([]byte(want), &exp)
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("request %d: dynamic_metadata %s, want %s", i, b, want)
		}
	}
}

// FuzzMaskSecret (issue 31, item 3): the value of a variable that is not on the allow-list
// (shownVariables) is never logged, whatever its name, and the password of a URL never is,
// whatever the variable; so a variable named like a harmless one but spelt otherwise
// ("redis_url", "REDIS_URL ") is masked too.
func FuzzMaskSecret(f *testing.F) {
	f.Add("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "authorization:Bearer s3cret", "pw#/? x")
	f.Add("REDIS_URL", "127.0.0.1:6379", "s3cret")
	f.Add("redis_url", "tok3n-value", "p@ss")
	f.Fuzz(func(t *testing.T, name, value, password string) {
		if len(value) >= 6 && !shownVariables[name] && !strings.Contains(value, "://") && strings.Trim(value, "x") != "" {
			if got := maskSecret(name, value); strings.Contains(got, value) {
				t.Errorf("maskSecret(%q, %q) = %q: a variable off the allow-list is shown", name, value, got)
			}
		}
		if len(password) < 6 || strings.Trim(password, "x:@/?#&=,") == "" {
			return
		}
		u := "redis://user:" + password + "@redis:6379/0"
		if got := maskSecret(name, u); strings.Contains(got, password) {
			t.Errorf("maskSecret(%q, %q) = %q keeps the password", name, u, got)
		}
	})
}
