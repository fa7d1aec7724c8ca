package redis

import (
	"crypto/tls"
	"net"
)

// tlsConfig verifies the server's certificate for the host of addr.
func tlsConfig(addr string) *tls.Config {
	host, _, _ := net.SplitHostPort(addr)
	return &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
}

// tlsOption returns the TLS configuration of WithTLS among opts, or nil.
func tlsOption(opts []Option) *tls.Config {
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	return c.tls
}
