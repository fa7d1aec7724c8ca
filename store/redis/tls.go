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
