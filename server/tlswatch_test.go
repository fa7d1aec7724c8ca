package server_test

import (
	"crypto/tls"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/server"
)

// TestCertificateExpiry (issue 31 item 8): the gRPC port's certificate is watched. One that
// expires in 3 days is warned about at start, naming it and its days left, and
// sluice_tls_certificate_days_left says 3. Rotated in place to one that has expired, the
// next handshake says so as an error at once; every client then refuses the server's
// certificate, and each refusal is counted (reason certificate_expired) and logged at most
// every HandshakeLogEvery, the lines held back counted in the next. A client that does not
// trust the CA, and one without a certificate under mutual TLS, are counted under their own
// reasons.
func TestCertificateExpiry(t *testing.T) {
	ca := testenv.NewCA(t, "rls", "")
	soon := ca.IssueValid(t, "server", time.Now().Add(-time.Hour), time.Now().Add(72*time.Hour), "127.0.0.1")
	client := ca.Issue(t, "envoy", "envoy.test")
	var logs testenv.LogBuffer
	h := start(t, tlsRules, func(c *server.Config) {
		c.GRPCTLS = &server.ServerTLS{CertFile: soon.CertFile, KeyFile: soon.KeyFile, ClientCAFile: ca.CAFile}
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	addr := h.srv.GRPCAddr()
	warned := logs.Records(t, "TLS certificate expires soon")
	if len(warned) != 1 || warned[0]["level"] != "WARN" || warned[0]["subject"] != "server" ||
		warned[0]["days_left"].(float64) < 2.9 || warned[0]["days_left"].(float64) > 3.0 {
		t.Errorf("warnings of a certificate expiring in 3 days: %v", warned)
	}
	if d := h.metricValue(t, `sluice_tls_certificate_days_left{listener="grpc"}`); d < 2.9 || d > 3 {
		t.Errorf("sluice_tls_certificate_days_left: %v, want 3", d)
	}

	// Rotated to an expired certificate: clients refuse it, counted and logged (throttled).
	ca.IssueValid(t, "server", time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), "127.0.0.1")
	good := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLSCertificate(t)},
		ServerName: "127.0.0.1", NextProtos: []string{"h2"}}
	dial := func(conf *tls.Config) error {
		c, err := tls.Dial("tcp", addr, conf)
		if err == nil {
			c.Close()
		}
		return err
	}
	// The files are looked at again at most once a second: the first refusal says it is served.
	testenv.Eventually(t, 10*time.Second, "the expired certificate served", func() bool {
		err := dial(good)
		return err != nil && strings.Contains(err.Error(), "expired")
	})
	const dials = 20
	for i := range dials {
		if err := dial(good); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("dial %d: %v, want the certificate refused as expired", i, err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "every refusal counted", func() bool {
		return h.metricValue(t, `sluice_tls_handshake_errors_total{listener="grpc",reason="certificate_expired"}`) == dials+1
	})
	if expired := logs.Records(t, "TLS certificate has expired"); len(expired) == 0 || expired[0]["level"] != "ERROR" {
		t.Errorf("no error line for the expired certificate: %v", expired)
	}
	lines := logs.Records(t, "TLS handshake failed")
	if len(lines) < 1 || len(lines) > 3 || lines[0]["reason"] != "certificate_expired" {
		t.Errorf("%d lines for %d refused handshakes (%v), want one every %v", len(lines), dials, lines, server.HandshakeLogEvery)
	}
	t.Logf("%d refused handshakes counted, %d logged", dials+1, len(lines))
	if d := h.metricValue(t, `sluice_tls_certificate_days_left{listener="grpc"}`); d >= 0 || d < -0.1 {
		t.Errorf("sluice_tls_certificate_days_left of a certificate expired an hour ago: %v, want -0.04", d)
	}

	// A client that does not trust the CA (Go's says "bad certificate"; OpenSSL's, as
	// Envoy's BoringSSL, "unknown CA"), one with no certificate: their own reasons.
	ca.Issue(t, "server", "127.0.0.1")
	look := good.Clone()
	look.InsecureSkipVerify = true // looks at the served certificate without refusing it
	testenv.Eventually(t, 10*time.Second, "a valid certificate served again", func() bool {
		c, err := tls.Dial("tcp", addr, look)
		if err != nil {
			return false
		}
		defer c.Close()
		return time.Now().Before(c.ConnectionState().PeerCertificates[0].NotAfter)
	})
	stranger := testenv.NewCA(t, "stranger", "")
	for _, tc := range []struct {
		reason string
		conf   *tls.Config
	}{
		{"bad_certificate", &tls.Config{RootCAs: stranger.Pool(), ServerName: "127.0.0.1", NextProtos: []string{"h2"}}},
		{"no_client_certificate", &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{"h2"}}},
	} {
		if c, err := tls.Dial("tcp", addr, tc.conf); err == nil {
			// TLS 1.3: the server's refusal of the client arrives with the first read.
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Read(make([]byte, 1))
			c.Close()
		}
		testenv.Eventually(t, 10*time.Second, tc.reason+" counted", func() bool {
			return h.metricValue(t, `sluice_tls_handshake_errors_total{listener="grpc",reason="`+tc.reason+`"}`) == 1
		})
	}
	if openssl, err := exec.LookPath("openssl"); err == nil {
		// TLS 1.2: OpenSSL's 1.3 alert reaches Go's server as "bad record MAC" (reason other).
		cmd := exec.Command(openssl, "s_client", "-connect", addr, "-CAfile", stranger.CAFile, "-verify_return_error", "-alpn", "h2", "-tls1_2")
		_ = cmd.Run() // fails: the point
		testenv.Eventually(t, 10*time.Second, "unknown_authority counted", func() bool {
			return h.metricValue(t, `sluice_tls_handshake_errors_total{listener="grpc",reason="unknown_authority"}`) == 1
		})
	} else {
		t.Log("no openssl: the unknown_authority reason is not checked")
	}
}
