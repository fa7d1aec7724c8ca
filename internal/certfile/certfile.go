// Package certfile reads TLS certificates and CA bundles from files and reads them again when
// the files change, as Kubernetes rotates a mounted secret in place (by swapping a symbolic
// link): a new connection gets the new certificate without a restart.
package certfile

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// minCheck is the least time between two looks at the files: a burst of handshakes costs
// one read per file.
const minCheck = time.Second

// watched is a value loaded from files and loaded again when their contents change (compared
// byte for byte: a file's modification time and size cannot tell two versions written within
// one tick of the file system's clock, and certificates and keys of one kind are often the
// same size). A change
// that does not load keeps the previous value (the error is returned, for the log), and is
// tried again at the next look. It is safe for concurrent use.
type watched[T any] struct {
	files []string
	what  string
	load  func() (T, error)

	mu      sync.Mutex
	checked time.Time
	seen    [][]byte // the files' contents when val was loaded; nil: load at the next look
	val     T
}

// get returns the value, first loading it again if the files changed since the last look
// (at most once a second).
func (w *watched[T]) get() (T, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Sub(w.checked) < minCheck {
		return w.val, nil
	}
	return w.reload(now)
}

// reload loads the value if the files' contents changed; w.mu is held (or w is new).
func (w *watched[T]) reload(now time.Time) (T, error) {
	w.checked = now
	contents := make([][]byte, len(w.files))
	for i, f := range w.files {
		b, err := os.ReadFile(f)
		if err != nil {
			return w.val, fmt.Errorf("certfile: %s: %w", w.what, err)
		}
		contents[i] = b
	}
	if w.seen != nil && slices.EqualFunc(contents, w.seen, bytes.Equal) {
		return w.val, nil
	}
	v, err := w.load()
	if err != nil {
		w.seen = nil // perhaps between the writes of two files: look again next time
		return w.val, err
	}
	w.val, w.seen = v, contents
	return v, nil
}

// KeyPair is a certificate and its key, read from two PEM files and read again when either
// changes. A KeyPair is safe for concurrent use.
type KeyPair struct{ w watched[*tls.Certificate] }

// LoadKeyPair reads the pair; an error names the files.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("certfile: a certificate and its key are both required")
	}
	kp := &KeyPair{w: watched[*tls.Certificate]{files: []string{certFile, keyFile}, what: "certificate and key",
		load: func() (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("certfile: %s and %s: %w", certFile, keyFile, err)
			}
			return &c, nil
		}}}
	if _, err := kp.w.reload(time.Now()); err != nil {
		return nil, err
	}
	return kp, nil
}

// Certificate returns the current pair; err reports a change that could not be loaded (the
// previous pair is returned).
func (kp *KeyPair) Certificate() (*tls.Certificate, error) { return kp.w.get() }

// Pool is a CA bundle read from a PEM file and read again when it changes. A Pool is safe
// for concurrent use.
type Pool struct{ w watched[*x509.CertPool] }

// LoadPool reads the bundle; a file with no certificate is an error naming it.
func LoadPool(file string) (*Pool, error) {
	p := &Pool{w: watched[*x509.CertPool]{files: []string{file}, what: "CA bundle",
		load: func() (*x509.CertPool, error) {
			data, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("certfile: CA bundle: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(data) {
				return nil, fmt.Errorf("certfile: CA bundle %s: no PEM certificate in it", file)
			}
			return pool, nil
		}}}
	if _, err := p.w.reload(time.Now()); err != nil {
		return nil, err
	}
	return p, nil
}

// CertPool returns the current bundle; err reports a change that could not be loaded (the
// previous bundle is returned).
func (p *Pool) CertPool() (*x509.CertPool, error) { return p.w.get() }
