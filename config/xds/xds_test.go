package xds_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/xds"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/rls"
)

// The two domains the tests serve, as xDS resources and as the same rules in YAML.
var (
	apiDomain = &rlsconf.RateLimitConfig{Name: "api-routes", Domain: "api", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "user", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: 3}},
		{Key: "path", Value: "/login", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR, RequestsPerUnit: 1, Name: "login"},
			Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "ip", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_SECOND, RequestsPerUnit: 2}}}},
		{Key: "free", RateLimit: &rlsconf.RateLimitPolicy{Unlimited: true}},
		{Key: "shadow", ShadowMode: true, RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_DAY, RequestsPerUnit: 1}},
	}}
	apiYAML = `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /login
    rate_limit: {unit: hour, requests_per_unit: 1, name: login}
    descriptors:
      - key: ip
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: free
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
`
	llmDomain = &rlsconf.RateLimitConfig{Name: "llm-tokens", Domain: "llm", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "model", Value: "big", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: 2}},
		{Key: "blocked", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_SECOND, RequestsPerUnit: 0}},
	}}
	llmYAML = `
domain: llm
descriptors:
  - key: model
    value: big
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
`
)

// requests are asked of both engines, in order: every answer must be the same.
var requests = [][]string{
	{"api", "user", "alice"}, {"api", "user", "alice"}, {"api", "user", "alice"}, {"api", "user", "alice"},
	{"api", "user", "bob"},
	{"api", "path", "/login"}, {"api", "path", "/login"},
	{"api", "path", "/login", "ip", "10.0.0.1"}, {"api", "path", "/login", "ip", "10.0.0.1"}, {"api", "path", "/login", "ip", "10.0.0.1"},
	{"api", "free", "x"}, {"api", "shadow", "x"}, {"api", "shadow", "x"}, {"api", "nomatch", "x"},
	{"llm", "model", "big"}, {"llm", "model", "big"}, {"llm", "model", "big"}, {"llm", "model", "small"},
	{"llm", "blocked", "y"}, {"unknown", "k", "v"},
}

func fileRules(t *testing.T) *config.Config {
	t.Helper()
	var docs []*config.Document
	for name, y := range map[string]string{"api.yaml": apiYAML, "llm.yaml": llmYAML} {
		d, err := config.Decode(name, []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	c, err := config.Compile(docs...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mtls is an xDS server's and its client's TLS, from one CA.
type mtls struct {
	ca     *testenv.CA
	server *tls.Config
	client *xds.ClientTLS
}

func newMTLS(t *testing.T) mtls {
	ca := testenv.NewCA(t, "xds", "")
	srv := ca.Issue(t, "xds-server", "xds.gateway.test")
	cl := ca.Issue(t, "ratelimit", "ratelimit.gateway.test")
	return mtls{ca: ca,
		server: &tls.Config{Certificates: []tls.Certificate{srv.TLSCertificate(t)}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert},
		client: &xds.ClientTLS{CAFile: ca.CAFile, CertFile: cl.CertFile, KeyFile: cl.KeyFile, ServerName: "xds.gateway.test"},
	}
}

func newClient(t *testing.T, o xds.Options) *xds.Client {
	t.Helper()
	if o.InitialBackoff == 0 {
		o.InitialBackoff, o.MaxBackoff = 20*time.Millisecond, 100*time.Millisecond
	}
	c, err := xds.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestXDSOverMTLS: over mutual TLS, the node (id, metadata, headers) is announced; until the
// first snapshot the engine answers errors, not OK; the snapshot of two domains gives the
// answers the same rules give from files, and is ACKed; a new snapshot takes effect within
// 2 s; an invalid one is NACKed and the rules in force keep serving.
func TestXDSOverMTLS(t *testing.T) {
	testenv.Timing(t) // a new snapshot within 2 s
	m := newMTLS(t)
	srv := testenv.StartXDS(t, "127.0.0.1:0", "gateway-node", m.server)
	client := newClient(t, xds.Options{Server: srv.Addr, NodeID: "gateway-node", TLS: m.client,
		NodeMetadata: map[string]string{"cluster": "eg"}, Headers: map[string]string{"x-tenant": "t1"}})
	e := newEngine(t, rls.Config{RulesSource: client, ReadyWithoutRules: true})
	if got := answer(e, "api", "user", "alice"); !strings.Contains(got, "no rules yet") {
		t.Fatalf("before any snapshot: %s, want an error (no rules yet)", got)
	}
	runEngine(t, e)
	testenv.Eventually(t, 10*time.Second, "stream opened", func() bool { return srv.FirstRequest() != nil })
	first := srv.FirstRequest()
	if first.GetNode().GetId() != "gateway-node" || first.GetNode().GetMetadata().GetFields()["cluster"].GetStringValue() != "eg" || first.GetTypeUrl() != xds.TypeURL {
		t.Fatalf("first request: node %v, type %q", first.GetNode(), first.GetTypeUrl())
	}
	tenant := srv.Metadata().Get("x-tenant")
	if !slices.Equal(tenant, []string{"t1"}) {
		t.Errorf("stream metadata x-tenant = %v, want [t1]", tenant)
	}
	if got := answer(e, "api", "user", "alice"); !strings.Contains(got, "no rules yet") {
		t.Fatalf("stream open, no snapshot: %s, want an error", got)
	}

	srv.Set(t, "1", apiDomain, llmDomain)
	testenv.Eventually(t, 10*time.Second, "first snapshot applied", e.HasRules)
	testenv.Eventually(t, 10*time.Second, "first snapshot ACKed", func() bool { return srv.Acked("1") })
	want := newEngine(t, rls.Config{Rules: fileRules(t)})
	for _, r := range requests {
		if got, exp := answer(e, r[0], r[1:]...), answer(want, r[0], r[1:]...); got != exp {
			t.Errorf("%v: xDS %s, file %s", r, got, exp)
		}
	}

	// A new snapshot: the user limit goes up from 3 to 5.
	changed := &rlsconf.RateLimitConfig{Name: "api-routes", Domain: "api", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "user", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: 5}}}}
	srv.Set(t, "2", changed, llmDomain)
	polls := 0
	took := testenv.Eventually(t, 2*time.Second, "new snapshot in force", func() bool {
		polls++ // a new user each time: the polls must not spend one budget
		return strings.HasPrefix(answer(e, "api", "user", fmt.Sprint("carol", polls)), "OK [api.user OK remaining=4")
	})
	t.Logf("new snapshot in force after %v", took)
	_ = 0
	testenv.Eventually(t, 10*time.Second, "new snapshot ACKed", func() bool { return srv.Acked("2") })

	// An invalid snapshot (a limit without a unit): NACKed, the rules stay.
	bad := &rlsconf.RateLimitConfig{Name: "bad", Domain: "other", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "k", RateLimit: &rlsconf.RateLimitPolicy{RequestsPerUnit: 5}}}}
	srv.Set(t, "3", changed, llmDomain, bad)
	testenv.Eventually(t, 10*time.Second, "invalid snapshot NACKed", func() bool { return len(srv.Nacks()) > 0 })
	nack := srv.Nacks()[0]
	for _, w := range []string{"xds:bad: descriptors[0].rate_limit.unit"} {
		if !strings.Contains(nack, w) {
			t.Errorf("NACK %q does not name %q", nack, w)
		}
	}
	if srv.Acked("3") {
		t.Error("the invalid snapshot was ACKed")
	}
	if got := answer(e, "api", "user", "dave"); !strings.HasPrefix(got, "OK [api.user OK remaining=4") {
		t.Errorf("after the NACK: %s, want the previous rules (limit 5)", got)
	}
}

// TestXDSUntrustedServer: a server whose certificate the client's CA did not sign never
// configures it: the handshake fails, the client retries, and no rules are applied.
func TestXDSUntrustedServer(t *testing.T) {
	m := newMTLS(t)
	impostor := testenv.NewCA(t, "impostor", "").Issue(t, "xds-server", "xds.gateway.test")
	srv := testenv.StartXDS(t, "127.0.0.1:0", "gateway-node", &tls.Config{Certificates: []tls.Certificate{impostor.TLSCertificate(t)}})
	srv.Set(t, "1", apiDomain)
	var logs testenv.LogBuffer
	client := newClient(t, xds.Options{Server: srv.Addr, NodeID: "gateway-node", TLS: m.client, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	e := newEngine(t, rls.Config{RulesSource: client})
	runEngine(t, e)
	// The engine runs the client; wait for three failed attempts.
	testenv.Eventually(t, 20*time.Second, "three refused connections", func() bool { return len(logs.Records(t, "xds: stream")) >= 3 })
	if e.HasRules() || srv.Streams() != 0 {
		t.Fatalf("configured by an untrusted server (rules %v, streams %d)", e.HasRules(), srv.Streams())
	}
	if _, err := e.Ready(t.Context()); !errors.Is(err, rls.ErrNoRules) {
		t.Errorf("Ready without rules and without ReadyWithoutRules: %v, want ErrNoRules", err)
	}
	if got := answer(e, "api", "user", "x"); !strings.Contains(got, "no rules yet") {
		t.Errorf("answer: %s, want an error", got)
	}
}

// TestXDSReconnects: when the server goes away, the client reconnects (with its backoff) to
// the server started again on the same address and takes its snapshot.
func TestXDSReconnects(t *testing.T) {
	first := testenv.StartXDS(t, "127.0.0.1:0", "n", nil)
	first.Set(t, "1", apiDomain)
	client := newClient(t, xds.Options{Server: first.Addr, NodeID: "n"})
	e := newEngine(t, rls.Config{RulesSource: client})
	runEngine(t, e)
	testenv.Eventually(t, 10*time.Second, "first snapshot", e.HasRules)
	first.GRPC.Stop()
	second := testenv.StartXDS(t, first.Addr, "n", nil)
	second.Set(t, "7", llmDomain)
	testenv.Eventually(t, 20*time.Second, "snapshot of the restarted server", func() bool {
		return slices.Equal(e.Rules().Domains(), []string{"llm"})
	})
	if !second.Acked("7") {
		testenv.Eventually(t, 10*time.Second, "ACK to the restarted server", func() bool { return second.Acked("7") })
	}
}

// TestNewRefusesBadOptions: every bad option is an error naming it.
func TestNewRefusesBadOptions(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		o    xds.Options
		want string
	}{
		{xds.Options{}, "server"},
		{xds.Options{Server: "x:1", InitialBackoff: -1}, "initial backoff"},
		{xds.Options{Server: "x:1", InitialBackoff: time.Minute, MaxBackoff: time.Second}, "max backoff"},
		{xds.Options{Server: "x:1", BackoffRandomFactor: 1.5}, "random factor"},
		{xds.Options{Server: "x:1", TLS: &xds.ClientTLS{CertFile: "c"}}, "both required"},
		{xds.Options{Server: "x:1", TLS: &xds.ClientTLS{CAFile: dir + "/missing.pem"}}, "missing.pem"},
	} {
		_, err := xds.New(c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %q", c.o, err, c.want)
		}
	}
}
