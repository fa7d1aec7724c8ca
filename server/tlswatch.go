package server

import (
	"context"
	"crypto/tls"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/internal/logthrottle"
)

// An expired server certificate is served silently otherwise (issue 31 item 8): every new
// client fails with "certificate has expired" and the server says nothing. So the gRPC
// port's certificate is watched: a metric of the days it has left, a warning while it has
// fewer than CertWarnBefore left (an error once it has expired), at most once an hour and at
// every change of certificate; and every handshake that fails is counted by its reason, and
// logged at most every HandshakeLogEvery with the count of those held back.

// CertWarnBefore is how long before its expiry the server certificate is warned about.
const CertWarnBefore = 14 * 24 * time.Hour

// Throttles of the lines of this file.
const (
	certLogEvery      = time.Hour
	HandshakeLogEvery = 10 * time.Second
)

// The reasons of sluice_tls_handshake_errors_total: what the client said of the server's
// certificate (its alert), or what the server found wrong with the client's.
const (
	reasonCertificateExpired = "certificate_expired"        // the client refused ours, which has expired
	reasonUnknownAuthority   = "unknown_authority"          // the client does not trust our CA
	reasonBadCertificate     = "bad_certificate"            // the client refused ours otherwise
	reasonNoClientCert       = "no_client_certificate"      // mutual TLS: the client sent none
	reasonClientCertRefused  = "client_certificate_refused" // mutual TLS: ours refused the client's
	reasonOther              = "other"                      // not TLS, cut off, timed out, ...
)

// handshakeReason classifies a failed server handshake.
func handshakeReason(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "remote error: tls: expired certificate"):
		return reasonCertificateExpired
	case strings.Contains(msg, "remote error: tls: unknown certificate authority"):
		return reasonUnknownAuthority
	case strings.Contains(msg, "remote error: tls: bad certificate"), strings.Contains(msg, "remote error: tls: unsupported certificate"),
		strings.Contains(msg, "remote error: tls: certificate unknown"), strings.Contains(msg, "remote error: tls: revoked certificate"):
		return reasonBadCertificate
	case strings.Contains(msg, "client didn't provide a certificate"):
		return reasonNoClientCert
	case strings.Contains(msg, "failed to verify certificate"), strings.Contains(msg, "does not carry the required name"):
		return reasonClientCertRefused
	}
	return reasonOther
}

// tlsWatch watches one listener's certificate and handshakes.
type tlsWatch struct {
	listener   string
	log        *slog.Logger
	now        func() time.Time
	handshakes *prometheus.CounterVec // by reason
	expiryLog  logthrottle.Throttle
	refusedLog logthrottle.Throttle

	mu       sync.Mutex // checkCert's
	lastLeaf []byte     // the certificate last checked (DER), to say a new one at once
}

// newTLSWatch registers the listener's metrics on reg: the certificate's days left (read at
// each scrape from cert) and the failed handshakes.
func newTLSWatch(listener string, log *slog.Logger, reg prometheus.Registerer, cert func() *tls.Certificate) (*tlsWatch, error) {
	w := &tlsWatch{listener: listener, log: log, now: time.Now,
		expiryLog:  logthrottle.Throttle{Interval: certLogEvery},
		refusedLog: logthrottle.Throttle{Interval: HandshakeLogEvery}}
	w.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_tls_handshake_errors_total",
		Help:        "TLS handshakes that failed on the listener, by reason: certificate_expired, unknown_authority and bad_certificate are clients refusing the server's certificate; no_client_certificate and client_certificate_refused the server refusing theirs.",
		ConstLabels: prometheus.Labels{"listener": listener}}, []string{"reason"})
	days := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_tls_certificate_days_left",
		Help:        "Days until the listener's TLS certificate expires (negative once it has): every client refuses an expired certificate.",
		ConstLabels: prometheus.Labels{"listener": listener}},
		func() float64 {
			if c := cert(); c != nil && c.Leaf != nil {
				return c.Leaf.NotAfter.Sub(w.now()).Hours() / 24
			}
			return 0
		})
	for _, c := range []prometheus.Collector{w.handshakes, days} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{reasonCertificateExpired, reasonUnknownAuthority, reasonBadCertificate, reasonNoClientCert, reasonClientCertRefused, reasonOther} {
		w.handshakes.WithLabelValues(r) // every series from the start: an alert on a rate sees 0
	}
	return w, nil
}

// checkCert warns when the certificate c, served now, expires within CertWarnBefore (an
// error when it has expired): at once for a certificate not checked before, else at most
// once an hour.
func (w *tlsWatch) checkCert(c *tls.Certificate) {
	if w == nil || c == nil || c.Leaf == nil {
		return
	}
	now := w.now()
	left := c.Leaf.NotAfter.Sub(now)
	if left > CertWarnBefore {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(c.Certificate) > 0 && string(c.Certificate[0]) != string(w.lastLeaf) {
		w.lastLeaf = c.Certificate[0]
		w.expiryLog = logthrottle.Throttle{Interval: certLogEvery} // a new certificate: say it now
	}
	level, msg := slog.LevelWarn, "TLS certificate expires soon: replace it, or clients will refuse it"
	if left <= 0 {
		level, msg = slog.LevelError, "TLS certificate has expired: every client refuses it; replace it (the file is read again when it changes)"
	}
	w.expiryLog.Log(context.Background(), w.log, now, level, msg, slog.String("listener", w.listener),
		slog.Time("not_after", c.Leaf.NotAfter), slog.Float64("days_left", math.Round(left.Hours()/24*100)/100),
		slog.String("subject", c.Leaf.Subject.CommonName))
}

// refused counts a failed handshake from remote and logs it (throttled). A client refusing
// the certificate while it has expired refuses it for that (Go's client says only "bad
// certificate").
func (w *tlsWatch) refused(remote net.Addr, err error, cert *tls.Certificate) {
	reason := handshakeReason(err)
	if reason == reasonBadCertificate && cert != nil && cert.Leaf != nil && !w.now().Before(cert.Leaf.NotAfter) {
		reason = reasonCertificateExpired
	}
	w.handshakes.WithLabelValues(reason).Inc()
	attrs := []slog.Attr{slog.String("listener", w.listener), slog.String("reason", reason), slog.String("err", err.Error())}
	if remote != nil {
		attrs = append(attrs, slog.String("remote", remote.String()))
	}
	if cert != nil && cert.Leaf != nil && reason == reasonCertificateExpired {
		attrs = append(attrs, slog.Time("not_after", cert.Leaf.NotAfter))
	}
	w.refusedLog.Log(context.Background(), w.log, w.now(), slog.LevelWarn, "TLS handshake failed", attrs...)
}

// watchedCreds are transport credentials whose failed server handshakes a tlsWatch sees.
type watchedCreds struct {
	credentials.TransportCredentials
	st *loadedTLS
}

func (c watchedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		cert, _ := c.st.pair.Certificate()
		c.st.watch.refused(conn.RemoteAddr(), err, cert)
	}
	return out, info, err
}

func (c watchedCreds) Clone() credentials.TransportCredentials {
	return watchedCreds{c.TransportCredentials.Clone(), c.st}
}
