package certfile

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestLoadClientNamesTheFile: each problem of a client's files is an *Error naming which.
func TestLoadClientNamesTheFile(t *testing.T) {
	ca := testenv.NewCA(t, "ca", "")
	leaf := ca.Issue(t, "client", "c")
	other := ca.Issue(t, "other", "o")
	for _, c := range []struct {
		ca, cert, key string
		field         string
	}{
		{ca: t.TempDir() + "/missing.pem", field: "ca"},
		{cert: leaf.CertFile, field: "cert, key"},
		{key: leaf.KeyFile, field: "cert, key"},
		{cert: leaf.CertFile, key: other.KeyFile, field: "cert"},
	} {
		_, err := LoadClient(c.ca, c.cert, c.key)
		var fe *Error
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: %v, want an *Error of field %q", c, err, c.field)
		}
	}
	if _, err := LoadClient(ca.CAFile, leaf.CertFile, leaf.KeyFile); err != nil {
		t.Fatal(err)
	}
}

// TestClientFollowsRotation: the configuration a Client gives a new connection has the
// client certificate as it is at the handshake and the CA bundle as it is: a pair rotated in
// place is presented from the next handshake on, one that does not load keeps the previous
// (no failed handshake), and a rotated bundle is the next connection's. A shared store
// (store.ClientTLS) and the xDS client (config/xds) both build their connections on it.
func TestClientFollowsRotation(t *testing.T) {
	ca := testenv.NewCA(t, "ca", "")
	first := ca.Issue(t, "client", "c")
	c, err := LoadClient(ca.CAFile, first.CertFile, first.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	look := func() string {
		t.Helper()
		c.pair.w.mu.Lock()
		c.pair.w.checked = time.Time{} // the next handshake looks at the files now
		c.pair.w.mu.Unlock()
		cert, err := c.Config("").GetClientCertificate(nil)
		if err != nil || cert == nil {
			t.Fatalf("GetClientCertificate: %v, %v; want a certificate and no error", cert, err)
		}
		return cert.Leaf.SerialNumber.String()
	}
	if got := look(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("serial %s, want %s", got, first.Cert.SerialNumber)
	}
	second := ca.Issue(t, "client", "c") // rotated in place
	if got := look(); got != second.Cert.SerialNumber.String() {
		t.Errorf("after the rotation: serial %s, want %s", got, second.Cert.SerialNumber)
	}
	if err := os.WriteFile(second.KeyFile, []byte("half written"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := look(); got != second.Cert.SerialNumber.String() {
		t.Errorf("a rotation that does not load: serial %s, want the previous %s", got, second.Cert.SerialNumber)
	}
	before := c.Config("").RootCAs
	ca2 := testenv.NewCA(t, "ca", "") // another authority at another path: rotate the bundle in place
	pem, err := os.ReadFile(ca2.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca.CAFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	c.ca.w.mu.Lock()
	c.ca.w.checked = time.Time{}
	c.ca.w.mu.Unlock()
	if after := c.Config("").RootCAs; after == before || after == nil {
		t.Errorf("after the bundle's rotation: same pool %v", after == before)
	}
}
