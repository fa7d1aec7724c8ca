package memcached

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// tlsDialer dials a server and completes the TLS handshake with c, within timeout (the
// store's bound on a round trip, as gomemcache's own dialer).
func tlsDialer(c *tls.Config, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: c}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return d.DialContext(ctx, network, addr)
	}
}
