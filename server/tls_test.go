package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/server"
)

const tlsRules = `
domain: tls
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// tlsCall calls ShouldRateLimit once over a new connection with creds and returns the
// error.
func tlsCall(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "tls", Descriptors: []*rlcommonDescriptor{desc("user", "a")}})
	return err
}

func clientCreds(roots *x509.CertPool, certs ...tls.Certificate) credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: certs, ServerName: "127.0.0.1"})
}

// TestGRPCMutualTLS: with a client CA (and a SAN), only clients with a certificate of that
// CA carrying that name are answered; without one, plain text, another CA's certificate or
// another name, the connection is refused.
func TestGRPCMutualTLS(t *testing.T) {
	ca := testenv.NewCA(t, "rls", "")
	srvCert := ca.Issue(t, "server", "127.0.0.1")
	good := ca.Issue(t, "envoy", "envoy.gateway.test")
	wrongName := ca.Issue(t, "other", "other.test")
	stranger := testenv.NewCA(t, "stranger", "").Issue(t, "stranger", "envoy.gateway.test")
	h := start(t, tlsRules, func(c *server.Config) {
		c.GRPCTLS = &server.ServerTLS{CertFile: srvCert.CertFile, KeyFile: srvCert.KeyFile, ClientCAFile: ca.CAFile, ClientSAN: "envoy.gateway.test"}
	})
	addr := h.srv.GRPCAddr()
	if err := tlsCall(t, addr, clientCreds(ca.Pool(), good.TLSCertificate(t))); err != nil {
		t.Fatalf("client with a good certificate: %v", err)
	}
	for name, creds := range map[string]credentials.TransportCredentials{
		"no certificate":     clientCreds(ca.Pool()),
		"plain text":         insecure.NewCredentials(),
		"another CA":         clientCreds(ca.Pool(), stranger.TLSCertificate(t)),
		"another name (SAN)": clientCreds(ca.Pool(), wrongName.TLSCertificate(t)),
	} {
		if err := tlsCall(t, addr, creds); err == nil {
			t.Errorf("%s: answered, want the connection refused", name)
		}
	}
}

// TestGRPCTLSWithoutClientCA: TLS alone answers clients without a certificate, and a client
// that does not trust the server's CA refuses it.
func TestGRPCTLSWithoutClientCA(t *testing.T) {
	ca := testenv.NewCA(t, "rls", "")
	srvCert := ca.Issue(t, "server", "127.0.0.1")
	h := start(t, tlsRules, func(c *server.Config) {
		c.GRPCTLS = &server.ServerTLS{CertFile: srvCert.CertFile, KeyFile: srvCert.KeyFile}
	})
	if err := tlsCall(t, h.srv.GRPCAddr(), clientCreds(ca.Pool())); err != nil {
		t.Fatalf("TLS client: %v", err)
	}
	if err := tlsCall(t, h.srv.GRPCAddr(), clientCreds(x509.NewCertPool())); err == nil {
		t.Fatal("a client that does not trust the server's CA was answered")
	}
}

// TestGRPCTLSRotation: the server certificate and the client CA bundle rotated in place (as
// Kubernetes rotates a secret) are used by the next connections, without a restart.
func TestGRPCTLSRotation(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewCA(t, "rls", dir)
	srvCert := ca.Issue(t, "server", "127.0.0.1")
	client := ca.Issue(t, "envoy", "envoy.test")
	clientCA := testenv.NewCA(t, "clients", dir) // the client CA bundle, rotated below
	oldClient := clientCA.Issue(t, "old-client", "envoy.test")
	h := start(t, tlsRules, func(c *server.Config) {
		c.GRPCTLS = &server.ServerTLS{CertFile: srvCert.CertFile, KeyFile: srvCert.KeyFile, ClientCAFile: clientCA.CAFile}
	})
	addr := h.srv.GRPCAddr()
	serial := func() string {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{"h2"},
			Certificates: []tls.Certificate{oldClient.TLSCertificate(t)}})
		if err != nil {
			return "dial: " + err.Error()
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	if strings.HasPrefix(before, "dial") || before != srvCert.Cert.SerialNumber.String() {
		t.Fatalf("first certificate: got serial %s, want %s", before, srvCert.Cert.SerialNumber)
	}
	rotated := ca.Issue(t, "server", "127.0.0.1") // same files, new certificate
	deadline := time.Now().Add(10 * time.Second)
	for serial() != rotated.Cert.SerialNumber.String() {
		if time.Now().After(deadline) {
			t.Fatalf("the rotated certificate was not served within 10s (still %s)", serial())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The client CA bundle: replaced by ca's, the old clients are refused and ca's accepted.
	if err := tlsCall(t, addr, clientCreds(ca.Pool(), oldClient.TLSCertificate(t))); err != nil {
		t.Fatalf("client of the first CA before the rotation: %v", err)
	}
	replaceFile(t, clientCA.CAFile, ca.CAFile)
	for tlsCall(t, addr, clientCreds(ca.Pool(), client.TLSCertificate(t))) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the rotated client CA bundle was not used within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := tlsCall(t, addr, clientCreds(ca.Pool(), oldClient.TLSCertificate(t))); err == nil {
		t.Fatal("a client of the replaced CA is still answered")
	}
}

// TestGRPCTLSBadFiles: a missing or mismatched file is refused by New, naming it.
func TestGRPCTLSBadFiles(t *testing.T) {
	ca := testenv.NewCA(t, "rls", "")
	a := ca.Issue(t, "a", "127.0.0.1")
	b := ca.Issue(t, "b", "127.0.0.1")
	for _, c := range []struct {
		tls  server.ServerTLS
		want string
	}{
		{server.ServerTLS{CertFile: a.CertFile}, "key file"},
		{server.ServerTLS{CertFile: a.CertFile, KeyFile: a.KeyFile + ".missing"}, ".missing"},
		{server.ServerTLS{CertFile: a.CertFile, KeyFile: b.KeyFile}, "b-key.pem"},
		{server.ServerTLS{CertFile: a.CertFile, KeyFile: a.KeyFile, ClientCAFile: a.KeyFile}, "no PEM certificate"},
		{server.ServerTLS{CertFile: a.CertFile, KeyFile: a.KeyFile, ClientSAN: "x"}, "client CA"},
	} {
		cfg := server.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "-", GRPCTLS: &c.tls}
		cfg.Rules = compile(t, tlsRules)
		s, err := server.New(cfg)
		if err == nil {
			s.Close()
			t.Errorf("%+v: no error", c.tls)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %q does not name %q", c.tls, err, c.want)
		}
	}
}

type rlcommonDescriptor = rlcommon.RateLimitDescriptor

// replaceFile copies src over dst through a rename, as a secret volume swaps its files.
func replaceFile(t *testing.T, dst, src string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+".new", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dst+".new", dst); err != nil {
		t.Fatal(err)
	}
}
