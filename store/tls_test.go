package store_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// These tests start TLS-only servers of their own (testenv.StartRedisTLS and friends), which
// require client certificates of a test authority generated in the test's directory.

// mtls is the store TLS of files: their authority and client certificate.
func mtls(f *testenv.TLSFiles) store.ClientTLS {
	return store.ClientTLS{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey}
}

// holdsLimit opens c (with Ping) and checks that the store holds a limit of 3: three allowed,
// the fourth denied.
func holdsLimit(t *testing.T, c store.Config) {
	t.Helper()
	ctx := context.Background()
	c.Ping, c.Prefix, c.Timeout = true, freshPrefix(), 5*time.Second
	st, closer, err := store.Open(ctx, c)
	if err != nil {
		t.Fatalf("open %s: %v", c.URL, err)
	}
	defer closer.Close()
	lim := sluice.New(st)
	for i := range 4 {
		d, err := lim.Allow(ctx, "tls-key", sluice.FixedWindow(3, time.Minute))
		if err != nil {
			t.Fatalf("%s: decision %d: %v", c.URL, i, err)
		}
		if d.Allowed != (i < 3) {
			t.Fatalf("%s: decision %d allowed=%v, want %v", c.URL, i, d.Allowed, i < 3)
		}
	}
}

// refused opens c with Ping and checks that it fails as the store being unavailable (the
// TLS handshake refused).
func refused(t *testing.T, what string, c store.Config) {
	t.Helper()
	c.Ping, c.Timeout = true, 2*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, closer, err := store.Open(ctx, c)
	if err == nil {
		defer closer.Close()
		// memcached's Ping does not take ctx: a decision must fail then.
		_, err = st.Take(ctx, sluice.Request{Key: "k", Rule: sluice.FixedWindow(3, time.Minute), N: 1})
	}
	if err == nil {
		t.Fatalf("%s: %s answered, want the connection refused", what, c.URL)
	}
}

// TestOpenRedisTLS: one Redis that accepts only TLS with a client certificate serves
// decisions over redis:// with TLS on and over rediss://; a client without its certificate,
// trusting another authority, or expecting another name is refused, and
// SkipHostnameVerification accepts the other name (the chain still verified).
func TestOpenRedisTLS(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	srv := testenv.StartRedisTLS(t, files, "")
	holdsLimit(t, store.Config{Backend: store.Backend{URL: "redis://" + srv.Addr(), TLS: mtls(files)}})
	holdsLimit(t, store.Config{Backend: store.Backend{URL: "rediss://" + srv.Addr() + "/1", TLS: mtls(files)}})
	holdsLimit(t, store.Config{Backend: store.Backend{URL: "rediss://localhost:" + strings.Split(srv.Addr(), ":")[1], TLS: mtls(files)}})

	refused(t, "plain text", store.Config{Backend: store.Backend{URL: "redis://" + srv.Addr()}})
	refused(t, "no client certificate", store.Config{Backend: store.Backend{URL: "redis://" + srv.Addr(), TLS: store.ClientTLS{CAFile: files.CA}}})
	other := mtls(files)
	other.CAFile = files.OtherCA
	refused(t, "another authority", store.Config{Backend: store.Backend{URL: "redis://" + srv.Addr(), TLS: other}})
	other.SkipHostnameVerification = true // the chain is still verified
	refused(t, "another authority, names not verified", store.Config{Backend: store.Backend{URL: "redis://" + srv.Addr(), TLS: other}})

	wrongName := mtls(files)
	wrongName.ServerName = "redis.example"
	refused(t, "another server name", store.Config{Backend: store.Backend{URL: "redis://" + srv.Addr(), TLS: wrongName}})
	wrongName.SkipHostnameVerification = true
	holdsLimit(t, store.Config{Backend: store.Backend{URL: "redis://" + srv.Addr(), TLS: wrongName}})
}

// TestOpenRedisSentinelTLS: a Sentinel and its primary, both TLS-only with client
// certificates, serve decisions over redis-sentinel:// (TLS to the Sentinel and to the
// primary it names); without TLS the Sentinel is not reached.
func TestOpenRedisSentinelTLS(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	sentinel, _ := testenv.StartSentinelTLS(t, files)
	url := "redis-sentinel://" + sentinel.Addr() + "/sluice"
	holdsLimit(t, store.Config{Backend: store.Backend{URL: url, TLS: mtls(files)}})
	refused(t, "plain text", store.Config{Backend: store.Backend{URL: url}})
}

// TestOpenRedisClusterTLS: a three-primary Cluster talking TLS to clients and on its bus
// serves decisions over redis-cluster:// on keys of every node.
func TestOpenRedisClusterTLS(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	nodes := testenv.StartClusterTLS(t, files, 3)
	url := "redis-cluster://" + nodes[0].Addr()
	ctx := context.Background()
	st, closer, err := store.Open(ctx, store.Config{Backend: store.Backend{URL: url, TLS: mtls(files), Ping: true, Prefix: freshPrefix(), Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} { // slots on every node
		for i := range 3 {
			d, err := st.Take(ctx, sluice.Request{Key: key, Rule: sluice.FixedWindow(2, time.Minute), N: 1})
			if err != nil {
				t.Fatalf("key %s: %v", key, err)
			}
			if d.Allowed != (i < 2) {
				t.Fatalf("key %s decision %d: allowed=%v", key, i, d.Allowed)
			}
		}
	}
	refused(t, "plain text", store.Config{Backend: store.Backend{URL: url}})
}

// TestOpenMemcachedTLS: a memcached that accepts only TLS with a client certificate (-Z,
// ssl_verify_mode=3) serves decisions over memcached:// with TLS on; plain text and a client
// without a certificate are refused.
func TestOpenMemcachedTLS(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	srv := testenv.StartMemcachedTLS(t, files)
	holdsLimit(t, store.Config{Backend: store.Backend{URL: "memcached://" + srv.Addr(), TLS: mtls(files)}})
	refused(t, "plain text", store.Config{Backend: store.Backend{URL: "memcached://" + srv.Addr()}})
	refused(t, "no client certificate", store.Config{Backend: store.Backend{URL: "memcached://" + srv.Addr(), TLS: store.ClientTLS{CAFile: files.CA}}})
}

// TestOpenSharedTLS: the TLS servers scripts/test.d/tls.sh starts for the whole suite (Redis
// and memcached, client certificates required) serve decisions with the files it generated.
func TestOpenSharedTLS(t *testing.T) {
	tl := store.ClientTLS{CAFile: testenv.Get(t, "SLUICE_TLS_CA"), CertFile: testenv.Get(t, "SLUICE_TLS_CLIENT_CERT"),
		KeyFile: testenv.Get(t, "SLUICE_TLS_CLIENT_KEY")}
	holdsLimit(t, store.Config{Backend: store.Backend{URL: "rediss://" + testenv.Get(t, "SLUICE_REDIS_TLS_ADDR"), TLS: tl}})
	holdsLimit(t, store.Config{Backend: store.Backend{URL: "memcached://" + testenv.Get(t, "SLUICE_MEMCACHED_TLS_ADDR"), TLS: tl}})
}

// TestTLSConfigErrors: unreadable or incomplete TLS settings are errors naming the field,
// from Validate and Open, before anything is dialed.
func TestTLSConfigErrors(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	notPEM := t.TempDir() + "/not.pem"
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tls  store.ClientTLS
		want string
	}{
		{store.ClientTLS{CAFile: t.TempDir() + "/missing.pem"}, "store: tls ca:"},
		{store.ClientTLS{CAFile: notPEM}, "store: tls ca:"},
		{store.ClientTLS{CertFile: files.ClientCert}, "store: tls cert, tls key:"},
		{store.ClientTLS{KeyFile: files.ClientKey}, "store: tls cert, tls key:"},
		{store.ClientTLS{CertFile: files.ClientCert, KeyFile: files.ServerKey}, "store: tls cert:"},
		{store.ClientTLS{CertFile: notPEM, KeyFile: notPEM}, "store: tls cert:"},
	} {
		cfg := store.Config{Backend: store.Backend{URL: "redis://127.0.0.1:1", TLS: c.tls}}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error containing %q", c.tls, err, c.want)
		}
		if _, _, err := store.Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%+v) = %v, want an error containing %q", c.tls, err, c.want)
		}
	}
	// Valid settings, TLS on or off, validate.
	for _, tl := range []store.ClientTLS{{}, {Enabled: true}, mtls(files), {SkipHostnameVerification: true}} {
		if err := (store.Config{Backend: store.Backend{URL: "redis://127.0.0.1:1", TLS: tl}}).Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", tl, err)
		}
	}
	if tc, err := (store.ClientTLS{}).ClientConfig(); tc != nil || err != nil {
		t.Errorf("zero TLS: ClientConfig() = %v, %v; want nil, nil", tc, err)
	}
}

// TestTLSClientCertificateRotated: the client certificate of a store's TLS is read again when
// it is rotated in place, as the xDS client's (both are internal/certfile's Client, whose
// TestClientFollowsRotation shows a rotation that does not load keeping the previous pair):
// a handshake after the rotation presents the new one.
func TestTLSClientCertificateRotated(t *testing.T) {
	ca := testenv.NewCA(t, "ca", "")
	first := ca.Issue(t, "client", "sluice-test-client")
	c, err := store.ClientTLS{CAFile: ca.CAFile, CertFile: first.CertFile, KeyFile: first.KeyFile}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		t.Helper()
		cert, err := c.GetClientCertificate(nil)
		if err != nil || cert == nil {
			t.Fatalf("GetClientCertificate: %v, %v; want a certificate", cert, err)
		}
		return cert.Leaf.SerialNumber.String()
	}
	if got := serial(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("serial %s, want %s", got, first.Cert.SerialNumber)
	}
	second := ca.Issue(t, "client", "sluice-test-client") // the whole pair, rotated in place
	testenv.Eventually(t, 10*time.Second, "the rotated certificate", func() bool { return serial() == second.Cert.SerialNumber.String() })
}
