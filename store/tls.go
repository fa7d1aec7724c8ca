package store

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLS says how a shared store's connections use TLS: every connection to Redis (one server,
// each Sentinel and the primary it names, each Cluster node) and to memcached. The zero TLS
// adds nothing: a rediss:// URL then verifies the server with the system roots, and other
// URLs connect in plain text.
//
// These are the settings of envoyproxy/ratelimit's REDIS_TLS, REDIS_TLS_CACERT,
// REDIS_TLS_CLIENT_CERT, REDIS_TLS_CLIENT_KEY, REDIS_TLS_SKIP_HOSTNAME_VERIFICATION and
// MEMCACHE_TLS, MEMCACHE_TLS_CACERT, MEMCACHE_TLS_CLIENT_CERT, MEMCACHE_TLS_CLIENT_KEY,
// MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION.
type TLS struct {
	// Enabled turns TLS on for redis://, redis-sentinel://, redis-cluster:// and memcached://
	// (rediss:// always uses it). Setting any other field turns it on too.
	Enabled bool
	// CAFile is a PEM file of the certificate authorities that sign the servers'
	// certificates (default: the system roots).
	CAFile string
	// CertFile and KeyFile are the PEM client certificate and key presented to servers that
	// ask for one (Redis' tls-auth-clients, memcached's ssl_verify_mode). Both or neither. They
	// are read again at each new connection, so a certificate rotated in place is used from
	// the next connection on.
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
func (t TLS) on() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.SkipHostnameVerification
}

// Validate reports every problem of t, each naming its field (tls ca, tls cert, tls key),
// reading the files.
func (t TLS) Validate() error {
	_, err := t.ClientConfig()
	return err
}

// ClientConfig returns the client TLS configuration t describes, or nil when t asks for no
// TLS. The files are read now (a missing or invalid one is an error naming its field), and the
// client certificate again at each handshake.
func (t TLS) ClientConfig() (*tls.Config, error) {
	if !t.on() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	var errs []error
	if t.CAFile != "" {
		pool, err := readCAs(t.CAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("store: tls ca: %w", err))
		}
		c.RootCAs = pool
	}
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		errs = append(errs, errors.New("store: tls cert, tls key: give both the client certificate and its key, or neither"))
	case t.CertFile != "":
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			errs = append(errs, fmt.Errorf("store: tls cert: %w", err))
		}
		cert, key := t.CertFile, t.KeyFile
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			kp, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("store: tls cert: %w", err)
			}
			return &kp, nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if t.SkipHostnameVerification {
		c.InsecureSkipVerify = true // the chain is verified below, without the name
		c.VerifyConnection = verifyChain(c.RootCAs)
	}
	return c, nil
}

// readCAs reads a PEM file of certificates into a pool.
func readCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
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
