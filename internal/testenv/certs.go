package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test: certificates and keys are generated with
// crypto/x509, written to the test's temporary directory, never committed.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CAFile  string // the CA certificate, PEM
	dir     string
	counter int64
}

// NewCA makes a CA and writes its certificate to a file in dir (t.TempDir() when empty).
func NewCA(t testing.TB, name, dir string) *CA {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, Key: key, dir: dir, counter: 1}
	ca.CAFile = filepath.Join(dir, name+"-ca.pem")
	writePEM(t, ca.CAFile, "CERTIFICATE", der)
	return ca
}

// Leaf is an issued certificate: its files and the parsed certificate.
type Leaf struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
}

// Issue issues a certificate for both server and client use, named by names (DNS names, IP
// addresses, or URIs with a scheme such as spiffe://), and writes it and its key to
// <name>.pem and <name>-key.pem in the CA's directory (replacing them: Issue again with the
// same name rotates in place).
func (ca *CA) Issue(t testing.TB, name string, names ...string) Leaf {
	t.Helper()
	return ca.IssueValid(t, name, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), names...)
}

// IssueValid is Issue of a certificate valid from notBefore to notAfter (one that expires
// soon, or has expired).
func (ca *CA) IssueValid(t testing.TB, name string, notBefore, notAfter time.Time, names ...string) Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.counter++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.counter),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if u, err := url.Parse(n); err == nil && u.Scheme != "" {
			tmpl.URIs = append(tmpl.URIs, u)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l := Leaf{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem")}
	l.Cert, _ = x509.ParseCertificate(der)
	// Written to new files then renamed over the old, as a secret volume swaps its files.
	writePEM(t, l.KeyFile+".new", "PRIVATE KEY", keyDER)
	writePEM(t, l.CertFile+".new", "CERTIFICATE", der)
	for _, f := range []string{l.KeyFile, l.CertFile} {
		if err := os.Rename(f+".new", f); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// Pool returns a pool holding the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// TLSCertificate loads the leaf's key pair.
func (l Leaf) TLSCertificate(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writePEM(t testing.TB, name, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
