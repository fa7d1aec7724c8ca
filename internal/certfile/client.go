package certfile

import (
	"crypto/tls"
	"errors"
)

// Client is the files of a TLS client, as a shared store (store.ClientTLS) and the xDS client
// (config/xds) read them: the CA bundle that verifies servers and the client's certificate
// and key. Both follow a certificate rotated in place the same way: the files are read again
// when they change (looked at once a second at most), and a rotated file that does not load
// keeps the previous certificate (or bundle) until it does. A Client is safe for concurrent
// use.
type Client struct {
	ca   *Pool    // nil: the system roots
	pair *KeyPair // nil: no client certificate
}

// Error is a problem with a file of a Client: Field says which, "ca", "cert" (the pair), or
// "cert, key" when only one of the two is given.
type Error struct {
	Field string
	Err   error
}

func (e *Error) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// ErrHalfPair is the Err of a Client's Error when only one of certificate and key is given.
var ErrHalfPair = errors.New("certfile: a client certificate and its key are both required, or neither")

// LoadClient reads the CA bundle caFile ("": the system roots) and the client certificate
// certFile with its key keyFile (both or neither). Each problem is an *Error, joined.
func LoadClient(caFile, certFile, keyFile string) (*Client, error) {
	c := &Client{}
	var errs []error
	if caFile != "" {
		p, err := LoadPool(caFile)
		if err != nil {
			errs = append(errs, &Error{Field: "ca", Err: err})
		}
		c.ca = p
	}
	switch {
	case (certFile == "") != (keyFile == ""):
		errs = append(errs, &Error{Field: "cert, key", Err: ErrHalfPair})
	case certFile != "":
		kp, err := LoadKeyPair(certFile, keyFile)
		if err != nil {
			errs = append(errs, &Error{Field: "cert", Err: err})
		}
		c.pair = kp
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// Config returns a TLS configuration for new connections to servers named serverName (""
// : the host each connection dials): the CA bundle as it is now, and the client certificate
// as it is at each handshake.
func (c *Client) Config(serverName string) *tls.Config {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if c.ca != nil {
		tc.RootCAs, _ = c.ca.CertPool() // a bad new bundle keeps the previous one
	}
	if c.pair != nil {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := c.pair.Certificate() // a bad new pair keeps the previous one
			return cert, nil
		}
	}
	return tc
}
