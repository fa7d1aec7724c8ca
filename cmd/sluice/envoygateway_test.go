package main

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/tracing/otlptest"
	"github.com/sluicehq/sluice/server"
)

// TestEnvoyGatewayDoneWhen is issue 21's "Done when": sluice serve with no flags and Envoy
// Gateway's environment (envoyGatewayEnv, the variables its ratelimit infrastructure sets,
// and nothing else but addresses): rules from a go-control-plane SotW server over mutual TLS
// serving two domains; RLS over mutual TLS; a Redis reached over TLS with client
// certificates (REDIS_TLS, REDIS_TLS_CLIENT_CERT/KEY; REDIS_TLS_CACERT for the test's own
// authority); the decisions those of the same rules from files (runPeerBasicBase, as
// TestPeerIntegration has them); a new snapshot in force within 2 s; an invalid one NACKed
// with the old rules serving; a client without a certificate refused; spans at an OTLP
// receiver (TRACING_*, OTEL_EXPORTER_OTLP_ENDPOINT); the series of PROMETHEUS_MAPPER_YAML on
// PROMETHEUS_ADDR; and statsd lines at a UDP listener (Envoy Gateway sets USE_STATSD=false:
// here USE_STATSD=true and STATSD_* are added, as a deployment with a statsd_exporter has).
func TestEnvoyGatewayDoneWhen(t *testing.T) {
	testenv.Timing(t) // a new snapshot within 2 s
	p := newGatewayPKI(t)
	xdsSrv := testenv.StartXDS(t, "127.0.0.1:0", "envoy-ratelimit", &tls.Config{
		Certificates: []tls.Certificate{p.xds.TLSCertificate(t)}, ClientCAs: p.ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})
	files := testenv.NewTLSFiles(t)
	redisTLS := testenv.StartRedisTLS(t, files, "")
	otlp := otlptest.NewReceiver(t)
	statsd := listenStatsd(t)
	mapping := filepath.Join(t.TempDir(), "mapping.yaml")
	if err := os.WriteFile(mapping, []byte(`mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "eg_ratelimit_hits"
    labels: {domain: "$1", descriptor: "$2"}
  - match: "ratelimit.service.rate_limit.*.*.over_limit"
    name: "eg_ratelimit_over_limit"
    labels: {domain: "$1", descriptor: "$2"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	prefix := "sluice-eg-" + uniq() + ":"
	s := startServe(t, envoyGatewayEnv(p, xdsSrv.Addr,
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisTLS.Addr(), "REDIS_TLS=true",
		"REDIS_TLS_CLIENT_CERT="+files.ClientCert, "REDIS_TLS_CLIENT_KEY="+files.ClientKey, "REDIS_TLS_CACERT="+files.CA,
		"CACHE_KEY_PREFIX="+prefix, "REDIS_TIMEOUT=5s", // the first TLS handshakes on a loaded machine
		"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0", "PROMETHEUS_MAPPER_YAML="+mapping,
		"TRACING_ENABLED=true", "TRACING_SERVICE_NAME=RateLimit", "TRACING_SERVICE_NAMESPACE=envoy-gateway-system",
		"TRACING_SERVICE_INSTANCE_ID=envoy-ratelimit-0", "TRACING_SAMPLING_RATE=1", "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL,
		"OTEL_BSP_SCHEDULE_DELAY=20",
		"USE_STATSD=true", "STATSD_HOST=127.0.0.1", "STATSD_PORT="+statsd.port(), "STATSD_PROTOCOL=udp", "STATS_FLUSH_INTERVAL=100ms"))
	for _, line := range s.log() {
		if strings.Contains(line, "not honoured") {
			t.Errorf("Envoy Gateway's environment has a setting not honoured: %s", line)
		}
	}
	s.client = rlsOverTLS(t, s, p, p.envoy.TLSCertificate(t))

	// Two domains over xDS, answered as the same rules from files answer them, on the TLS Redis.
	xdsSrv.Set(t, "1", peerXdsBasicConfig()...)
	testenv.Eventually(t, 10*time.Second, "the first snapshot ACKed", func() bool { return xdsSrv.Acked("1") })
	runPeerBasicBase(t, s)
	rc := goredis.NewClient(&goredis.Options{Addr: redisTLS.Addr(), TLSConfig: files.ClientConfig(t)})
	defer rc.Close()
	if keys, err := rc.Keys(context.Background(), prefix+"*").Result(); err != nil || len(keys) == 0 {
		t.Errorf("keys under %s in the TLS Redis: %v, %v; want the decisions'", prefix, keys, err)
	}

	// A new snapshot within 2 s; an invalid one NACKed, the rules in force kept.
	xdsSrv.Set(t, "2", peerXdsReloadConfig()...)
	took := testenv.Eventually(t, 2*time.Second, "snapshot 2 in force", func() bool {
		return peerSummary(s.ask(t, "grpc", rlReq("reload", 1, []string{"block", "foo"}))) == "OVER_LIMIT; OVER_LIMIT 0/SECOND rem=0"
	})
	t.Logf("snapshot 2 in force %v after it was set", took)
	bad := &rlsconf.RateLimitConfig{Name: "bad", Domain: "bad", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k", RateLimit: &rlsconf.RateLimitPolicy{RequestsPerUnit: 1}}}}
	xdsSrv.Set(t, "3", append(peerXdsBasicConfig(), bad)...)
	testenv.Eventually(t, 10*time.Second, "the invalid snapshot NACKed", func() bool { return len(xdsSrv.Nacks()) > 0 })
	runPeerCases(t, s, "grpc", []peerCase{{"reload/block after the NACK", rlReq("reload", 1, []string{"block", "foo"}), "OVER_LIMIT; OVER_LIMIT 0/SECOND rem=0"}})

	// A client without a certificate is refused.
	if _, err := rlsOverTLS(t, s, p).ShouldRateLimit(context.Background(), rlReq("basic", 1, []string{"key1", "x"})); err == nil {
		t.Error("a client without a certificate: answered, want refused")
	}

	// Spans at the OTLP receiver, with Envoy Gateway's service attributes.
	spans := otlp.WaitSpans(server.DecideSpan, 10*time.Second)
	if len(spans) == 0 {
		t.Error("no span at the OTLP receiver")
	} else if r := spans[0].Resource; r["service.name"] != "RateLimit" || r["service.namespace"] != "envoy-gateway-system" {
		t.Errorf("span resource %v", r)
	}

	// The mapping file's series on PROMETHEUS_ADDR: another key2 had 40 hits (25, then 15 beside key3), 5 over its limit.
	want := []string{`eg_ratelimit_hits{descriptor="key2",domain="another"} 40`, `eg_ratelimit_over_limit{descriptor="key2",domain="another"} 5`}
	testenv.Eventually(t, 10*time.Second, "the mapping file's series", func() bool {
		_, body := s.get(t, s.metrics, "/metrics")
		return strings.Contains(body, "\n"+want[0]+"\n") && strings.Contains(body, "\n"+want[1]+"\n")
	})

	// statsd lines at the UDP listener, with the peer's names.
	statsd.waitStat(t, "ratelimit.service.rate_limit.another.key2.total_hits", 40)
	statsd.waitStat(t, "ratelimit.service.rate_limit.another.key2.over_limit", 5)
	if !statsd.has("ratelimit_server.ShouldRateLimit.total_requests:") {
		t.Error("no ratelimit_server.ShouldRateLimit.total_requests line")
	}
}
