package certfile

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestKeyPairRotation: a pair rotated in place is read at the next look; a rotation that
// does not load (a key that does not match, a file gone) keeps the previous pair and says
// why, and the pair is read again once the files are whole.
func TestKeyPairRotation(t *testing.T) {
	ca := testenv.NewCA(t, "ca", "")
	first := ca.Issue(t, "srv", "127.0.0.1")
	kp, err := LoadKeyPair(first.CertFile, first.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	look := func() (string, error) {
		kp.w.mu.Lock()
		kp.w.checked = time.Time{} // the next call looks at the files now
		kp.w.mu.Unlock()
		c, err := kp.Certificate()
		return c.Leaf.SerialNumber.String(), err
	}
	second := ca.Issue(t, "srv", "127.0.0.1")
	if got, err := look(); err != nil || got != second.Cert.SerialNumber.String() {
		t.Fatalf("after the rotation: serial %s, %v; want %s", got, err, second.Cert.SerialNumber)
	}
	other := ca.Issue(t, "other", "127.0.0.1")
	key, _ := os.ReadFile(other.KeyFile)
	if err := os.WriteFile(second.KeyFile, key, 0o600); err != nil { // a key that does not match
		t.Fatal(err)
	}
	if got, err := look(); err == nil || !strings.Contains(err.Error(), "srv-key.pem") || got != second.Cert.SerialNumber.String() {
		t.Fatalf("mismatched key: serial %s, %v; want the previous pair and an error naming the file", got, err)
	}
	third := ca.Issue(t, "srv", "127.0.0.1")
	if got, err := look(); err != nil || got != third.Cert.SerialNumber.String() {
		t.Fatalf("after a good rotation: serial %s, %v; want %s", got, err, third.Cert.SerialNumber)
	}
	if err := os.Remove(third.CertFile); err != nil {
		t.Fatal(err)
	}
	if got, err := look(); err == nil || got != third.Cert.SerialNumber.String() {
		t.Fatalf("file gone: serial %s, %v; want the previous pair and an error", got, err)
	}
}

// TestPoolRotation: a CA bundle replaced by one without a certificate keeps the previous.
func TestPoolRotation(t *testing.T) {
	ca := testenv.NewCA(t, "ca", "")
	p, err := LoadPool(ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := p.CertPool()
	if err := os.WriteFile(ca.CAFile, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.w.checked = time.Time{}
	after, err := p.CertPool()
	if err == nil || after != before {
		t.Fatalf("a bad bundle: %v, same pool %v; want an error and the previous pool", err, after == before)
	}
	if _, err := LoadPool(ca.CAFile); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("LoadPool of a bad bundle: %v", err)
	}
}
