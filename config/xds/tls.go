package xds

import (
	"crypto/tls"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/internal/certfile"
)

// tlsFiles are the loaded files of a TLS, kept so that a change is read again.
type tlsFiles struct {
	once sync.Once
	err  error
	pair *certfile.KeyPair
	ca   *certfile.Pool
}

// config returns the TLS configuration of a new connection.
func (t *TLS) config() (*tls.Config, error) {
	f := t.files // set by New
	f.once.Do(func() {
		if (t.CertFile == "") != (t.KeyFile == "") {
			f.err = errors.New("xds: TLS: a client certificate and its key are both required (or neither)")
			return
		}
		if t.CertFile != "" {
			if f.pair, f.err = certfile.LoadKeyPair(t.CertFile, t.KeyFile); f.err != nil {
				f.err = fmt.Errorf("xds: TLS client certificate: %w", f.err)
				return
			}
		}
		if t.CAFile != "" {
			if f.ca, f.err = certfile.LoadPool(t.CAFile); f.err != nil {
				f.err = fmt.Errorf("xds: TLS server CA: %w", f.err)
			}
		}
	})
	if f.err != nil {
		return nil, f.err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if f.ca != nil {
		pool, _ := f.ca.CertPool() // a bad new bundle keeps the previous one
		tc.RootCAs = pool
	}
	if f.pair != nil {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, _ := f.pair.Certificate() // a bad new pair keeps the previous one
			return c, nil
		}
	}
	return tc, nil
}
