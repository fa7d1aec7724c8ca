package store

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/certfile"
)

// ClientTLS says how a shared store's connections use TLS: every connection to Redis (one
// server, each Sentinel and the primary it names, each Cluster node) and to memcached. The
// zero ClientTLS adds nothing: a rediss:// URL then verifies the server with the system roots, and other
// URLs connect in plain text.
//
// These are the settings of envoyproxy/ratelimit's REDIS_TLS, REDIS_TLS_CACERT,
// REDIS_TLS_CLIENT_CERT, REDIS_TLS_CLIENT_KEY, REDIS_TLS_SKIP_HOSTNAME_VERIFICATION and
// MEMCACHE_TLS, MEMCACHE_TLS_CACERT, MEMCACHE_TLS_CLIENT_CERT, MEMCACHE_TLS_CLIENT_KEY,
// MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION.
type ClientTLS struct {
	// Enabled turns TLS on for redis://, redis-sentinel://, redis-cluster:// and memcached://
	// (rediss:// always uses it). Setting any other field turns it on too.
	Enabled bool
	// CAFile is a PEM file of the certificate authorities that sign the servers'
	// certificates (default: the system roots).
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and key presented to servers that
	// ask for one (Redis' tls-auth-clients, memcached's ssl_verify_mode). Both or neither. They
	// are read again when they change, so a certificate rotated in place is used from the
	// next handshake on; a rotated pair that does not load keeps the previous one.
	CertFile, KeyFile string
	// ServerName is the name the servers' certificates must carry (default: the host of each
	// address dialed, which an IP address matches through the certificate's IP SANs).
	ServerName string
	// SkipHostnameVerification accepts a server certificate signed by a trusted authority
	// whatever name it carries (the chain is still verified): for servers reached through
	// addresses their certificates do not name, such as Sentinel's announced IPs.
	SkipHostnameVerification bool
}

// on reports whether t asks for TLS.
func (t ClientTLS) on() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.SkipHostnameVerification
}

// Validate reports every problem of t, each naming its field (tls ca, tls cert, tls key),
// reading the files.
func (t ClientTLS) Validate() error {
	_, err := t.ClientConfig()
	return err
}

// ClientConfig returns the client TLS configuration t describes, or nil when t asks for no
// TLS. The files are read now (a missing or invalid one is an error naming its field) and
// again when they change (internal/certfile, as the xDS client's): the client certificate
// at the next handshake, a rotated one that does not load keeping the previous one; the CA
// bundle as it is when the store opens, every connection of a store sharing one
// configuration.
func (t ClientTLS) ClientConfig() (*tls.Config, error) {
	if !t.on() {
		return nil, nil
	}
	files, err := certfile.LoadClient(t.CAFile, t.CertFile, t.KeyFile)
	if err != nil {
		return nil, storeTLSError(err)
	}
	c := files.Config(t.ServerName)
	if t.SkipHostnameVerification {
		c.InsecureSkipVerify = true // the chain is verified below, without the name
		c.VerifyConnection = verifyChain(c.RootCAs)
	}
	return c, nil
}

// storeTLSError names the field of each problem of certfile.LoadClient: tls ca, tls cert.
func storeTLSError(err error) error {
	var out []error
	for _, e := range unjoin(err) {
		var fe *certfile.Error
		switch {
		case !errors.As(e, &fe):
			out = append(out, fmt.Errorf("store: tls: %w", e))
		case fe.Field == "cert, key":
			out = append(out, errors.New("store: tls cert, tls key: give both the client certificate and its key, or neither"))
		default:
			out = append(out, fmt.Errorf("store: tls %s: %w", fe.Field, fe.Err))
		}
	}
	return errors.Join(out...)
}

// unjoin returns the errors joined in err (err alone when it is not a join).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// verifyChain verifies a server's certificate chain against roots (nil: the system roots)
// without checking the name it carries.
func verifyChain(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("store: tls: the server sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(opts)
		return err
	}
}
