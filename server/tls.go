package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/internal/certfile"
)

// ServerTLS configures TLS on the gRPC port (RLS, RLQS, health). The files are read again
// when they change (looked at, at most once a second, by new handshakes), as Kubernetes rotates a
// mounted secret in place: new connections get the new certificate and CA bundle, open ones
// keep theirs. A change that does not load keeps the previous files' (logged).
type ServerTLS struct {
	// CertFile and KeyFile are the server's certificate chain and key, PEM. Required.
	CertFile, KeyFile string
	// ClientCAFile, when set, is a PEM bundle of the CAs client certificates must chain to,
	// and every client must present one (mutual TLS): envoyproxy/ratelimit's
	// GRPC_CLIENT_TLS_CACERT, Envoy Gateway's GRPC_SERVER_TLS_CA_CERT.
	ClientCAFile string
	// ClientSAN, when set, is a name the client certificate must carry: a DNS name or IP
	// address as envoyproxy/ratelimit's GRPC_CLIENT_TLS_SAN checks it, or a URI (a SPIFFE
	// ID) or an e-mail address. It needs ClientCAFile.
	ClientSAN string
}

// loadedTLS is a ServerTLS with its files loaded.
type loadedTLS struct {
	t     ServerTLS
	log   *slog.Logger
	pair  *certfile.KeyPair
	ca    *certfile.Pool
	watch *tlsWatch // the certificate's expiry and the failed handshakes (tlswatch.go)
}

// grpcCreds loads t's files and returns the gRPC server option, its certificate and
// handshakes watched with metrics on reg; nil t is plain text.
func (t *ServerTLS) grpcCreds(log *slog.Logger, reg prometheus.Registerer) (grpc.ServerOption, error) {
	if t == nil {
		return nil, nil
	}
	st, err := t.load(log)
	if err != nil {
		return nil, err
	}
	current := func() *tls.Certificate { c, _ := st.pair.Certificate(); return c }
	if st.watch, err = newTLSWatch("grpc", log, reg, current); err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	st.watch.checkCert(current())
	return grpc.Creds(watchedCreds{credentials.NewTLS(&tls.Config{GetConfigForClient: st.configForClient}), st}), nil
}

func (t *ServerTLS) load(log *slog.Logger) (*loadedTLS, error) {
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, errors.New("server: TLS: cert file and key file are both required")
	}
	if t.ClientSAN != "" && t.ClientCAFile == "" {
		return nil, errors.New("server: TLS: client SAN needs a client CA file (mutual TLS)")
	}
	st := &loadedTLS{t: *t, log: log}
	var err error
	if st.pair, err = certfile.LoadKeyPair(t.CertFile, t.KeyFile); err != nil {
		return nil, fmt.Errorf("server: TLS: %w", err)
	}
	if t.ClientCAFile != "" {
		if st.ca, err = certfile.LoadPool(t.ClientCAFile); err != nil {
			return nil, fmt.Errorf("server: TLS client CA: %w", err)
		}
	}
	return st, nil
}

// configForClient is the configuration of one handshake, with the files as they are now.
func (st *loadedTLS) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	cert, err := st.pair.Certificate()
	if err != nil {
		st.log.Error("TLS certificate change not loaded; the previous certificate serves", "err", err)
	}
	st.watch.checkCert(cert)
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"h2"},
	}
	if st.ca != nil {
		pool, err := st.ca.CertPool()
		if err != nil {
			st.log.Error("TLS client CA change not loaded; the previous bundle verifies", "err", err)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
		if st.t.ClientSAN != "" {
			c.VerifyPeerCertificate = verifyClientSAN(st.t.ClientSAN)
		}
	}
	return c, nil
}

// verifyClientSAN checks that the verified client certificate carries san.
func verifyClientSAN(san string) func([][]byte, [][]*x509.Certificate) error {
	return func(_ [][]byte, chains [][]*x509.Certificate) error {
		if len(chains) == 0 || len(chains[0]) == 0 {
			return errors.New("server: TLS: no verified client certificate")
		}
		leaf := chains[0][0]
		if leaf.VerifyHostname(san) == nil || slices.Contains(leaf.EmailAddresses, san) {
			return nil
		}
		for _, u := range leaf.URIs {
			if u.String() == san {
				return nil
			}
		}
		return fmt.Errorf("server: TLS: the client certificate does not carry the required name %q", san)
	}
}
