package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/tracing/otlptest"
	"github.com/sluicehq/sluice/server"
)

// asRatelimitEnv makes this test binary, started as .../bin/ratelimit, run sluice's main
// (TestMain): the process Envoy Gateway starts, argv[0] and arguments included.
const asRatelimitEnv = "TEST_RUN_AS_RATELIMIT"

func TestMain(m *testing.M) {
	if os.Getenv(asRatelimitEnv) == "1" {
		main() // exits
	}
	os.Exit(m.Run())
}

// k8sContainer is the part of a Kubernetes Deployment's first container that the tests run.
type k8sContainer struct {
	Command, Args []string
	Env           []struct {
		Name, Value string
		ValueFrom   *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	}
	SecurityContext struct {
		RunAsUser *int64 `yaml:"runAsUser"`
	} `yaml:"securityContext"`
}

// manifestDoc returns the document of kind and name in the (multi-document) YAML file, decoded
// into out.
func manifestDoc(t *testing.T, file, kind, name string, out any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var node yaml.Node
		if err := dec.Decode(&node); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var head struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if node.Decode(&head) == nil && head.Kind == kind && head.Metadata.Name == name {
			if err := node.Decode(out); err != nil {
				t.Fatalf("%s: %s %s: %v", file, kind, name, err)
			}
			return
		}
	}
	t.Fatalf("%s: no %s named %s", file, kind, name)
}

// deploymentContainer is the first container of the Deployment name in file.
func deploymentContainer(t *testing.T, file, name string) k8sContainer {
	t.Helper()
	var d struct {
		Spec struct {
			Template struct {
				Spec struct{ Containers []k8sContainer }
			}
		}
	}
	manifestDoc(t, file, "Deployment", name, &d)
	if len(d.Spec.Template.Spec.Containers) == 0 {
		t.Fatalf("%s: Deployment %s has no container", file, name)
	}
	return d.Spec.Template.Spec.Containers[0]
}

// pod is a container's environment as the kubelet gives it, run here: the files it mounts
// under root (dir root + the mount path), the addresses of the cluster replaced by the test's.
type pod struct {
	root    string            // stands for the container's /
	addrs   map[string]string // variable -> the test's address for the cluster's
	name    string            // metadata.name, for a fieldRef
	extra   []string          // the test's additions, each said in the test
	changed map[string]bool   // variables whose value the test moved or replaced
}

// env returns c's environment in p: each variable of the manifest, a path moved under p.root, an
// address replaced (p.addrs), then p.extra.
func (p *pod) env(t *testing.T, c k8sContainer) []string {
	t.Helper()
	p.changed = map[string]bool{}
	var env []string
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			v = p.name
		case e.ValueFrom != nil:
			t.Fatalf("%s: valueFrom the test cannot give", e.Name)
		case p.addrs[e.Name] != "":
			v = p.addrs[e.Name]
			p.changed[e.Name] = true
		case strings.HasPrefix(v, "/"):
			v = filepath.Join(p.root, v)
			p.changed[e.Name] = true
		}
		env = append(env, e.Name+"="+v)
	}
	t.Logf("the manifest's environment (%d variables; moved or replaced: %v), and the test's additions %q", len(c.Env), p.changed, p.extra)
	return append(env, p.extra...)
}

// newPodRoot makes a directory that user 65534 can read (the kubelet's mounts are 0644
// files), holding a copy of this test binary at bin/ratelimit.
func newPodRoot(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "sluice-pod-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	podFile(t, root, "/bin/ratelimit", self, 0o755)
	return root
}

// podFile writes data at path under root, as a mounted file (0644) or the binary (mode).
func podFile(t *testing.T, root, path string, data []byte, mode os.FileMode) {
	t.Helper()
	full := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, mode); err != nil {
		t.Fatal(err)
	}
}

// podCopy copies the file src to path under root.
func podCopy(t *testing.T, root, path, src string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	podFile(t, root, path, data, 0o644)
}

// startPod runs c as the kubelet runs it: its command (/bin/ratelimit, under root) with its
// arguments and env, as its runAsUser when the test runs as root (else as the test's user,
// said in the log), and waits until it serves.
func startPod(t *testing.T, root string, c k8sContainer, env []string) (*served, *exec.Cmd) {
	t.Helper()
	if len(c.Command) != 1 || c.Command[0] != "/bin/ratelimit" {
		t.Fatalf("command %q, want /bin/ratelimit", c.Command)
	}
	cmd := exec.Command(filepath.Join(root, c.Command[0]), c.Args...)
	cmd.Env, cmd.Dir = append(env, asRatelimitEnv+"=1"), root
	if uid := c.SecurityContext.RunAsUser; uid != nil {
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(*uid), Gid: uint32(*uid)}}
		} else {
			t.Logf("runAsUser %d: the test is not root, so the process runs as uid %d", *uid, os.Geteuid())
		}
	}
	return startServeCmd(t, cmd, c.Args), cmd
}

// processUID is the real uid of process pid.
func processUID(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			uid, _ := strconv.Atoi(f[1])
			return uid
		}
	}
	return -1
}

// egFixtures are Envoy Gateway's files (testdata/envoy-gateway: its generated Deployments;
// internal/peerstats/testdata: the statsd_exporter mapping it mounts), v1.9.0.
const (
	egTracingDeployment  = "testdata/envoy-gateway/enable-tracing.yaml"
	egRedisTLSDeployment = "testdata/envoy-gateway/redis-tls-settings.yaml"
	egStatsdConf         = "../../internal/peerstats/testdata/envoy-gateway-v1.9.0-statsd_conf.yaml"
	egRateLimitConfig    = "testdata/envoy-gateway/distinct-match.yaml"
)

// egPod lays out what Envoy Gateway mounts: /certs (the rate-limit service's certificate,
// key and CA: the RLS server's and the xDS client's), /redis-certs (the Redis client
// certificate), /etc/statsd-exporter/conf.yaml (its statsd_conf.yaml), /data.
func egPod(t *testing.T, p gatewayPKI, redis *testenv.TLSFiles) string {
	t.Helper()
	root := newPodRoot(t)
	podCopy(t, root, "/certs/tls.crt", p.rls.CertFile)
	podCopy(t, root, "/certs/tls.key", p.rls.KeyFile)
	podCopy(t, root, "/certs/ca.crt", p.ca.CAFile)
	podCopy(t, root, "/etc/statsd-exporter/conf.yaml", egStatsdConf)
	if redis != nil {
		podCopy(t, root, "/redis-certs/tls.crt", redis.ClientCert)
		podCopy(t, root, "/redis-certs/tls.key", redis.ClientKey)
	}
	if err := os.MkdirAll(filepath.Join(root, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// egRules is Envoy Gateway's translation of a BackendTrafficPolicy's global limit (a
// distinct x-user-id header, 5 a second) into a RateLimitConfig, read from its golden file.
func egRules(t *testing.T) *rlsconf.RateLimitConfig {
	t.Helper()
	data, err := os.ReadFile(egRateLimitConfig)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rlsconf.RateLimitConfig{}
	// go-control-plane's ratelimit module v0.1.0 has no quota_mode, detailed_metric,
	// value_to_metric nor share_threshold: the golden file sets each false, the default.
	if strings.Contains(string(data), ": true") {
		t.Fatalf("%s sets a field true: check that this module reads it", egRateLimitConfig)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(js, cfg); err != nil {
		t.Fatalf("%s: %v", egRateLimitConfig, err)
	}
	return cfg
}

// egRequest is the request Envoy sends for a user under egRules: the route's generic key and
// the header's value (the golden distinct-match.routes.yaml's actions), hits units.
func egRequest(user string, hits uint64) *rlsv3.RateLimitRequest {
	r := rlReq("first-listener", 0, []string{"first-route", "first-route", "rule-0-match-0", user})
	r.Descriptors[0].HitsAddend = wrapperspb.UInt64(hits)
	return r
}

// TestEnvoyGatewayDeployment is issue 30's "Done when" for Envoy Gateway: sluice serve
// started as Envoy Gateway starts its rate-limit service — /bin/ratelimit, no argument, as
// user 65534 — with the environment of the Deployments Envoy Gateway v1.9.0 generates (its
// golden files, copied verbatim: every variable as written, but for the paths it mounts, moved
// under the test's directory, and the cluster's addresses, replaced by the test's; added:
// listeners on 127.0.0.1:0, which a shared machine needs, and where said the CA bundle of the
// platform and a statsd address), its statsd mapping file verbatim, and its rules over
// xDS as its translator writes them. With Prometheus and tracing on (enable-tracing.yaml):
// answers over mutual TLS, the mapped series (ratelimit_service_rate_limit_total_hits and the
// rest, statsd_conf.yaml's names) on PROMETHEUS_ADDR, spans at the OTLP endpoint. With Redis
// over TLS (redis-tls-settings.yaml: client certificate, REDIS_AUTH, statsd): answers from the
// TLS Redis when its CA is in the trust store; when it is not, the pod stays not ready
// (/healthcheck 503, gRPC health NOT_SERVING) and says why, naming the x509 error.
func TestEnvoyGatewayDeployment(t *testing.T) {
	testenv.Timing(t) // snapshots and spans within seconds
	t.Run("prometheus and tracing", func(t *testing.T) {
		c := deploymentContainer(t, egTracingDeployment, "envoy-ratelimit")
		p := newGatewayPKI(t)
		root := egPod(t, p, nil)
		xdsSrv := testenv.StartXDS(t, "127.0.0.1:0", "envoy-ratelimit", &tls.Config{
			Certificates: []tls.Certificate{p.xds.TLSCertificate(t)}, ClientCAs: p.ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})
		redis := testenv.StartRedis(t)
		otlp := otlptest.NewReceiver(t)
		pd := &pod{root: root, name: "envoy-ratelimit-7f9c6d-x2x4q", addrs: map[string]string{
			"CONFIG_GRPC_XDS_SERVER_URL": xdsSrv.Addr, "REDIS_URL": redis.Addr(), "PROMETHEUS_ADDR": "127.0.0.1:0",
			"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.URL},
			extra: []string{"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0"}}
		s, cmd := startPod(t, root, c, pd.env(t, c))
		checkEnvoyGatewayPod(t, s, cmd, c)
		s.client = rlsOverTLS(t, s, p, p.envoy.TLSCertificate(t))
		xdsSrv.Set(t, "1", egRules(t))
		testenv.Eventually(t, 10*time.Second, "the snapshot ACKed", func() bool { return xdsSrv.Acked("1") })
		runPeerCases(t, s, "grpc", []peerCase{
			{"alice's first", egRequest("alice", 1), "OK; OK 5/SECOND rem=4"},
			{"bob's 6 units", egRequest("bob", 6), "OVER_LIMIT; OVER_LIMIT 5/SECOND rem=0"},
		})
		if r := s.ask(t, "grpc", egRequest("bob", 6)); r.Statuses[0].DurationUntilReset.AsDuration() <= 0 {
			t.Errorf("OVER_LIMIT with duration_until_reset %v, want positive", r.Statuses[0].DurationUntilReset.AsDuration())
		}
		if keys, _ := goredis.NewClient(&goredis.Options{Addr: redis.Addr()}).Keys(context.Background(), "*first-route*").Result(); len(keys) == 0 {
			t.Error("no key of the decisions in Redis")
		}
		// statsd_conf.yaml's series on PROMETHEUS_ADDR, as the peer's statsd_exporter v0.26.1 maps them.
		want := []string{`ratelimit_service_rate_limit_total_hits{domain="first-listener",key1="first-route_first-route",key2="rule-0-match-0"}`,
			`ratelimit_service_rate_limit_over_limit{domain="first-listener",key1="first-route_first-route",key2="rule-0-match-0"}`,
			`ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}`,
			`# TYPE ratelimit_service_response_time_seconds histogram`}
		testenv.Eventually(t, 20*time.Second, "statsd_conf.yaml's series", func() bool {
			_, body := s.get(t, s.metrics, "/metrics")
			for _, w := range want {
				if !strings.Contains(body, w) {
					return false
				}
			}
			return true
		})
		spans := otlp.WaitSpans(server.DecideSpan, 10*time.Second)
		if len(spans) == 0 {
			t.Fatal("no span at the OTLP endpoint")
		}
		if r := spans[0].Resource; r["service.name"] != "envoy-ratelimit" || r["service.namespace"] != "envoy-gateway-system" ||
			r["service.instance.id"] != pd.name {
			t.Errorf("span resource %v, want Envoy Gateway's service attributes", r)
		}
	})

	redisTLS := func(t *testing.T, trusted bool) {
		c := deploymentContainer(t, egRedisTLSDeployment, "envoy-ratelimit")
		var auth string
		for _, e := range c.Env {
			if e.Name == "REDIS_AUTH" {
				auth = e.Value
			}
		}
		p := newGatewayPKI(t)
		files := testenv.NewTLSFiles(t)
		root := egPod(t, p, files)
		xdsSrv := testenv.StartXDS(t, "127.0.0.1:0", "envoy-ratelimit", &tls.Config{
			Certificates: []tls.Certificate{p.xds.TLSCertificate(t)}, ClientCAs: p.ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})
		redis := testenv.StartRedisTLS(t, files, "", "--requirepass", auth)
		statsd := listenStatsd(t)
		pd := &pod{root: root, name: "envoy-ratelimit-0", addrs: map[string]string{
			"CONFIG_GRPC_XDS_SERVER_URL": xdsSrv.Addr, "REDIS_URL": redis.Addr(), "PROMETHEUS_ADDR": "127.0.0.1:0"},
			// USE_STATSD=true sends to STATSD_HOST:STATSD_PORT, the peer's localhost:8125 by default.
			extra: []string{"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0",
				"STATSD_HOST=127.0.0.1", "STATSD_PORT=" + statsd.port(), "STATSD_PROTOCOL=udp", "STATS_FLUSH_INTERVAL=100ms"}}
		if trusted { // the Redis CA in the platform's trust store, as an operator installs it
			podCopy(t, root, "/etc/ssl/certs/redis-ca.crt", files.CA)
			pd.extra = append(pd.extra, "SSL_CERT_FILE="+filepath.Join(root, "/etc/ssl/certs/redis-ca.crt"))
		}
		s, cmd := startPod(t, root, c, pd.env(t, c))
		checkEnvoyGatewayPod(t, s, cmd, c)
		s.client = rlsOverTLS(t, s, p, p.envoy.TLSCertificate(t))
		xdsSrv.Set(t, "1", egRules(t))
		testenv.Eventually(t, 10*time.Second, "the snapshot ACKed", func() bool { return xdsSrv.Acked("1") })
		health := healthOverTLS(t, s, p)
		masked := redis.Addr()
		if !trusted {
			line := waitLine(t, s, "store unreachable: not ready until it answers", masked, "x509")
			if strings.Contains(line, auth) {
				t.Errorf("REDIS_AUTH in %q", line)
			}
			for _, path := range []string{"/healthcheck", "/readyz"} {
				if code, body := s.get(t, s.httpAddr, path); code != 503 || !strings.Contains(body, "x509") {
					t.Errorf("%s with an untrusted Redis CA: %d %q, want 503 naming the x509 error", path, code, body)
				}
			}
			for _, svc := range []string{"", server.PeerHealthService} {
				if st := healthCheck(t, health, svc); st != healthpb.HealthCheckResponse_NOT_SERVING {
					t.Errorf("gRPC health %q with an untrusted Redis CA: %v, want NOT_SERVING", svc, st)
				}
			}
			return
		}
		// Envoy Gateway sets no REDIS_TIMEOUT: each call has Sluice's 250 ms, which a new TLS
		// connection can take on a loaded machine; a call that timed out is asked again for
		// another user (it may have counted).
		testenv.Eventually(t, 20*time.Second, "a decision from the TLS Redis", func() bool {
			user := "carol-" + uniq()
			resp, err := s.client.ShouldRateLimit(context.Background(), egRequest(user, 2))
			if err != nil {
				t.Logf("%s: %v", user, err)
				return false
			}
			if got := peerSummary(resp); got != "OK; OK 5/SECOND rem=3" {
				t.Fatalf("%s: %s, want OK; OK 5/SECOND rem=3", user, got)
			}
			return true
		})
		if code, body := s.get(t, s.httpAddr, "/healthcheck"); code != 200 {
			t.Errorf("/healthcheck: %d %q", code, body)
		}
		if st := healthCheck(t, health, server.PeerHealthService); st != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("gRPC health: %v", st)
		}
		rc := goredis.NewClient(&goredis.Options{Addr: redis.Addr(), TLSConfig: files.ClientConfig(t), Password: auth})
		defer rc.Close()
		if keys, err := rc.Keys(context.Background(), "*first-route*").Result(); err != nil || len(keys) == 0 {
			t.Errorf("keys of the decisions in the TLS Redis: %v, %v", keys, err)
		}
		statsd.waitStat(t, "ratelimit.service.rate_limit.first-listener.first-route_first-route.rule-0-match-0.total_hits", 2)
	}
	t.Run("redis over TLS", func(t *testing.T) { redisTLS(t, true) })
	t.Run("redis over TLS, its CA not trusted", func(t *testing.T) { redisTLS(t, false) })
}

// checkEnvoyGatewayPod checks what any Envoy Gateway pod must show: it runs as the
// Deployment's runAsUser (65534) when the test can set it, and names no setting of the
// environment it does not honour.
func checkEnvoyGatewayPod(t *testing.T, s *served, cmd *exec.Cmd, c k8sContainer) {
	t.Helper()
	if uid := c.SecurityContext.RunAsUser; uid != nil && os.Geteuid() == 0 {
		if got := processUID(t, cmd.Process.Pid); got != int(*uid) {
			t.Errorf("the process runs as uid %d, want %d", got, *uid)
		}
	}
	for _, line := range s.log() {
		if strings.Contains(line, "not honoured") || strings.Contains(line, "level=ERROR") {
			t.Errorf("Envoy Gateway's environment: %s", line)
		}
	}
}

// healthOverTLS is a gRPC health client of s over mutual TLS.
func healthOverTLS(t *testing.T, s *served, p gatewayPKI) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: p.ca.Pool(), Certificates: []tls.Certificate{p.envoy.TLSCertificate(t)}, ServerName: "127.0.0.1"})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func healthCheck(t *testing.T, c healthpb.HealthClient, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("health %q: %v", service, err)
	}
	return resp.Status
}
