package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/config/xds"
	"github.com/sluicehq/sluice/internal/testenv"
)

// xdsPolicy is a RateLimitPolicy of n per unit.
func xdsPolicy(unit rlsconf.RateLimitUnit, n uint32) *rlsconf.RateLimitPolicy {
	return &rlsconf.RateLimitPolicy{Unit: unit, RequestsPerUnit: n}
}

// peerXdsBasicConfig is initialXdsBasicConfig of envoyproxy/ratelimit's xDS integration test
// (test/integration/xds_sotw_integration_test.go): the rules of its runtime directory's
// basic.yaml and another.yaml (testdata/envoyproxy-ratelimit), as xDS resources.
func peerXdsBasicConfig() []*rlsconf.RateLimitConfig {
	return []*rlsconf.RateLimitConfig{
		{Name: "basic", Domain: "basic", Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "key1", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_SECOND, 50)},
			{Key: "key1_local", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_SECOND, 50)},
			{Key: "one_per_minute", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_MINUTE, 1)},
		}},
		{Name: "another", Domain: "another", Descriptors: []*rlsconf.RateLimitDescriptor{
			{Key: "key2", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_MINUTE, 20)},
			{Key: "key3", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_HOUR, 10)},
			{Key: "key2_local", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_MINUTE, 20)},
			{Key: "key3_local", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_HOUR, 10)},
			{Key: "key4", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_DAY, 20)},
			{Key: "key4_local", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_DAY, 20)},
		}},
	}
}

// peerXdsReloadConfig is the peer's newConfigWithXdsConfigProvider: the basic config and a
// domain "reload".
func peerXdsReloadConfig() []*rlsconf.RateLimitConfig {
	return append(peerXdsBasicConfig(), &rlsconf.RateLimitConfig{Name: "reload", Domain: "reload", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "key1", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_SECOND, 50)},
		{Key: "block", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_SECOND, 0)},
		{Key: "one_per_minute", RateLimit: xdsPolicy(rlsconf.RateLimitUnit_MINUTE, 1)},
	}})
}

// gatewayPKI is the certificates of an Envoy Gateway deployment: one CA signing the xDS
// server's (the controller's), the rate-limit service's, and Envoy's client certificate.
type gatewayPKI struct {
	ca                     *testenv.CA
	xds, rls, envoy, other testenv.Leaf
}

func newGatewayPKI(t *testing.T) gatewayPKI {
	ca := testenv.NewCA(t, "envoy-gateway", "")
	return gatewayPKI{ca: ca,
		xds:   ca.Issue(t, "controller", "127.0.0.1"),
		rls:   ca.Issue(t, "ratelimit", "127.0.0.1"),
		envoy: ca.Issue(t, "envoy", "envoy.envoy-gateway-system.svc"),
		other: testenv.NewCA(t, "stranger", "").Issue(t, "stranger", "envoy.envoy-gateway-system.svc"),
	}
}

// envoyGatewayEnv is the environment Envoy Gateway gives the rate-limit service
// (internal/infrastructure/kubernetes/ratelimit), with ports of the kernel's choosing and
// JSON logs for the test to read.
func envoyGatewayEnv(p gatewayPKI, xdsAddr string, extra ...string) []string {
	return append([]string{
		"RUNTIME_ROOT=/data", "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true", "RUNTIME_WATCH_ROOT=false",
		"LOG_LEVEL=info", "USE_STATSD=false",
		"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL=" + xdsAddr, "CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit",
		"CONFIG_GRPC_XDS_SERVER_USE_TLS=true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT=" + p.rls.CertFile,
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY=" + p.rls.KeyFile, "CONFIG_GRPC_XDS_SERVER_TLS_CACERT=" + p.ca.CAFile,
		"FORCE_START_WITHOUT_INITIAL_CONFIG=true",
		"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + p.rls.CertFile, "GRPC_SERVER_TLS_KEY=" + p.rls.KeyFile,
		"GRPC_SERVER_TLS_CA_CERT=" + p.ca.CAFile,
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "LOG_FORMAT=json",
		// a fast reconnection for the test; the peer's default is 10s
		"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL=50ms", "XDS_CLIENT_BACKOFF_MAX_INTERVAL=200ms",
	}, extra...)
}

// rlsOverTLS connects to s's gRPC port with the client certificates certs (none: no client
// certificate) and makes it the client s.ask uses.
func rlsOverTLS(t *testing.T, s *served, p gatewayPKI, certs ...tls.Certificate) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: p.ca.Pool(), Certificates: certs, ServerName: "127.0.0.1"})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// TestServeEnvoyGatewayXDS runs sluice serve with no flags and Envoy Gateway's environment:
// rules from a go-control-plane SotW server over mutual TLS, RLS over mutual TLS. Healthy
// before the first snapshot (FORCE_START_WITHOUT_INITIAL_CONFIG), each request answered
// UNAVAILABLE until it arrives; then the peer's xDS integration cases (testXdsProviderBasicConfig:
// the answers its runtime directory's files give, as TestPeerIntegration has them, and
// testXdsProviderBasicConfigReload), an invalid snapshot NACKed with the rules kept, and a
// client without a certificate (or of another CA) refused.
func TestServeEnvoyGatewayXDS(t *testing.T) {
	testenv.Timing(t) // a new snapshot within 2 s
	peerEnvStores(t, func(t *testing.T, storeEnv []string) {
		p := newGatewayPKI(t)
		xdsSrv := testenv.StartXDS(t, "127.0.0.1:0", "envoy-ratelimit", &tls.Config{
			Certificates: []tls.Certificate{p.xds.TLSCertificate(t)}, ClientCAs: p.ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})
		s := startServe(t, envoyGatewayEnv(p, xdsSrv.Addr, storeEnv...))
		s.client = rlsOverTLS(t, s, p, p.envoy.TLSCertificate(t))

		if code, body := s.get(t, s.httpAddr, "/healthcheck"); code != 200 {
			t.Errorf("/healthcheck before the first snapshot: %d %q, want 200 (FORCE_START_WITHOUT_INITIAL_CONFIG)", code, body)
		}
		_, err := s.client.ShouldRateLimit(context.Background(), rlReq("basic", 1, []string{"key1", "foo"}))
		if status.Code(err) != codes.Unavailable {
			t.Errorf("request before the first snapshot: %v, want UNAVAILABLE", err)
		}

		xdsSrv.Set(t, "1", peerXdsBasicConfig()...)
		testenv.Eventually(t, 10*time.Second, "the first snapshot ACKed", func() bool { return xdsSrv.Acked("1") })
		runPeerBasicBase(t, s)

		// testConfigReload over xDS: the domain "reload" appears with snapshot 2, within 2 s.
		runPeerCases(t, s, "grpc", []peerCase{{"reload/block before the reload", rlReq("reload", 1, []string{"block", "foo"}), "OK; OK rem=0"}})
		xdsSrv.Set(t, "2", peerXdsReloadConfig()...)
		took := testenv.Eventually(t, 2*time.Second, "snapshot 2 in force", func() bool {
			return peerSummary(s.ask(t, "grpc", rlReq("reload", 1, []string{"block", "foo"}))) == "OVER_LIMIT; OVER_LIMIT 0/SECOND rem=0"
		})
		t.Logf("snapshot 2 in force %v after it was set", took)
		r := rand.Int64()
		runPeerCases(t, s, "grpc", []peerCase{{"reload key1", rlReq("reload", 1, []string{"key1", fmt.Sprint(r)}), "OK; OK 50/SECOND rem=49"}})
		xdsSrv.Set(t, "3", peerXdsBasicConfig()...) // restoreConfigWithXdsConfigProvider
		testenv.Eventually(t, 2*time.Second, "snapshot 3 in force", func() bool {
			return peerSummary(s.ask(t, "grpc", rlReq("reload", 1, []string{"block", "foo"}))) == "OK; OK rem=0"
		})

		// An invalid snapshot: NACKed, snapshot 3's rules keep serving.
		bad := &rlsconf.RateLimitConfig{Name: "bad", Domain: "bad", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k", RateLimit: &rlsconf.RateLimitPolicy{RequestsPerUnit: 1}}}}
		xdsSrv.Set(t, "4", append(peerXdsReloadConfig(), bad)...)
		testenv.Eventually(t, 10*time.Second, "the invalid snapshot NACKed", func() bool { return len(xdsSrv.Nacks()) > 0 })
		if n := xdsSrv.Nacks()[0]; !strings.Contains(n, "xds:bad") {
			t.Errorf("NACK %q does not name the resource", n)
		}
		runPeerCases(t, s, "grpc", []peerCase{{"reload/block after the NACK", rlReq("reload", 1, []string{"block", "foo"}), "OK; OK rem=0"}})

		// Envoy without a certificate, or with one of another CA, is refused.
		for name, c := range map[string]rlsv3.RateLimitServiceClient{
			"no client certificate": rlsOverTLS(t, s, p),
			"another CA":            rlsOverTLS(t, s, p, p.other.TLSCertificate(t)),
		} {
			if _, err := c.ShouldRateLimit(context.Background(), rlReq("basic", 1, []string{"key1", "x"})); err == nil {
				t.Errorf("%s: answered, want refused", name)
			}
		}
	})
}

// TestServeXDSWaitsForRules: without FORCE_START_WITHOUT_INITIAL_CONFIG (the flags of a
// non-peer user here: --xds-server, --xds-node-id), /healthcheck, /readyz and gRPC health
// ("ratelimit", the peer's service name) fail until the first snapshot, and pass after it.
func TestServeXDSWaitsForRules(t *testing.T) {
	xdsSrv := testenv.StartXDS(t, "127.0.0.1:0", "node-a", nil)
	s := startServe(t, nil, "--xds-server", xdsSrv.Addr, "--xds-node-id", "node-a", "--grpc-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--log-format", "json", "--xds-backoff-initial", "50ms")
	for _, path := range []string{"/healthcheck", "/readyz"} {
		if code, body := s.get(t, s.httpAddr, path); code == 200 {
			t.Errorf("%s before the first snapshot: 200 %q, want a failure", path, body)
		}
	}
	grpcHealth := func() healthpb.HealthCheckResponse_ServingStatus {
		r, err := healthpb.NewHealthClient(s.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "ratelimit"})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetStatus()
	}
	if st := grpcHealth(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health before the first snapshot: %v, want NOT_SERVING", st)
	}
	xdsSrv.Set(t, "1", peerXdsBasicConfig()...)
	testenv.Eventually(t, 10*time.Second, "/healthcheck after the first snapshot", func() bool {
		code, _ := s.get(t, s.httpAddr, "/healthcheck")
		return code == 200
	})
	if code, body := s.get(t, s.httpAddr, "/readyz"); code != 200 {
		t.Errorf("/readyz after the first snapshot: %d %q", code, body)
	}
	testenv.Eventually(t, 10*time.Second, "gRPC health SERVING", func() bool { return grpcHealth() == healthpb.HealthCheckResponse_SERVING })
	runPeerCases(t, s, "grpc", []peerCase{{"basic key1", rlReq("basic", 1, []string{"key1", fmt.Sprint(rand.Int64())}), "OK; OK 50/SECOND rem=49"}})
}

// TestServeSourceFlagErrors: bad xDS and TLS settings stop serve, naming the flag or the
// variable.
func TestServeSourceFlagErrors(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--xds-server", "h:1", "--config", "x.yaml"}, "--xds-server, --config"},
		{nil, []string{"--tls-cert", "c.pem"}, "--tls-cert, --tls-key"},
		{nil, []string{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-client-san", "x"}, "--tls-client-san"},
		{nil, []string{"--xds-server", "h:1", "--xds-node-metadata", "novalue"}, "--xds-node-metadata"},
		{nil, []string{"--xds-server", "h:1", "--xds-backoff-random-factor", "2"}, "--xds-backoff-random-factor"},
		{nil, []string{"--xds-server", "h:1", "--xds-tls-ca", "/nonexistent/ca.pem"}, "/nonexistent/ca.pem"},
		{nil, []string{"--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"}, "/nonexistent/c.pem"},
		{map[string]string{"CONFIG_TYPE": "GRPC_XDS_DELTA"}, nil, "CONFIG_TYPE"},
		{map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "c.pem"}, nil, "GRPC_SERVER_TLS_KEY"},
		{map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "c", "GRPC_SERVER_TLS_KEY": "k",
			"GRPC_CLIENT_TLS_CACERT": "a.pem", "GRPC_SERVER_TLS_CA_CERT": "b.pem"}, nil, "two client CA files"},
		{map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "soon"}, nil, "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL"},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		var out, errOut strings.Builder
		code := run(append([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, c.args...), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), c.want) { // 2 for a flag, 1 for a file
			t.Errorf("%v %v: exit %d, %q; want an error naming %s", c.env, c.args, code, errOut.String(), c.want)
		}
		for k := range c.env {
			t.Setenv(k, "") // restored when the test ends; empty for the next case
		}
	}
}

// TestCheckConfigXDSDump: check-config --xds accepts a dumped snapshot (here the peer's
// initial xDS config as a DiscoveryResponse in JSON, and as YAML) and refuses an invalid
// one, naming the file and the resource.
func TestCheckConfigXDSDump(t *testing.T) {
	dir := t.TempDir()
	var anys []string
	for _, r := range peerXdsBasicConfig() {
		b, err := protojson.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		anys = append(anys, `{"@type": "`+xds.TypeURL+`", `+strings.TrimPrefix(string(b), "{"))
	}
	good := filepath.Join(dir, "snapshot.json")
	writeTestFile(t, good, `{"versionInfo": "1", "resources": [`+strings.Join(anys, ",")+`]}`)
	goodYAML := filepath.Join(dir, "snapshot.yaml")
	writeTestFile(t, goodYAML, "- name: basic\n  domain: basic\n  descriptors:\n    - {key: key1, rate_limit: {unit: SECOND, requests_per_unit: 50}}\n")
	bad := filepath.Join(dir, "bad.yaml")
	writeTestFile(t, bad, "- name: basic\n  domain: basic\n  descriptors:\n    - {key: key1, rate_limit: {requests_per_unit: 50}}\n")
	var out, errOut strings.Builder
	if code := run([]string{"check-config", "--xds", good, goodYAML}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "snapshot.json: ok: 2 domain(s) [another basic], 9 limit(s)") || !strings.Contains(out.String(), "snapshot.yaml: ok: 1 domain(s)") {
		t.Errorf("good dumps: exit %d, %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"check-config", "--xds", bad}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "bad.yaml: xds: invalid snapshot") ||
		!strings.Contains(errOut.String(), "xds:basic: descriptors[0].rate_limit.unit") {
		t.Errorf("bad dump: exit %d, %q", code, errOut.String())
	}
}

func writeTestFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
