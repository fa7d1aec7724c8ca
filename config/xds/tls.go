package xds

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/certfile"
)

// load reads the TLS files (internal/certfile, as a shared store's TLS), naming the problem.
func (t *ClientTLS) load() error {
	files, err := certfile.LoadClient(t.CAFile, t.CertFile, t.KeyFile)
	if err != nil {
		var fe *certfile.Error
		switch {
		case !errors.As(err, &fe):
			return fmt.Errorf("xds: TLS: %w", err)
		case fe.Field == "cert, key":
			return errors.New("xds: TLS: a client certificate and its key are both required (or neither)")
		case fe.Field == "cert":
			return fmt.Errorf("xds: TLS client certificate: %w", fe.Err)
		}
		return fmt.Errorf("xds: TLS server CA: %w", fe.Err)
	}
	t.files = files
	return nil
}

// config returns the TLS configuration of a new connection: the CA bundle as it is now, the
// client certificate as it is at each handshake.
func (t *ClientTLS) config() *tls.Config { return t.files.Config(t.ServerName) }
