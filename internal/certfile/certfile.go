// Package certfile reads TLS certificates and CA bundles from files and reads them again when
// the files change, as Kubernetes rotates a mounted secret in place (by swapping a symbolic
// link): a new connection gets the new certificate without a restart.
package certfile

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// stamp identifies a version of a file: its modification time and size, as os.Stat (which
// follows symbolic links) reports them.
type stamp struct {
	mod  time.Time
	size int64
}

func stat(name string) (stamp, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return stamp{}, err
	}
	return stamp{fi.ModTime(), fi.Size()}, nil
}

// minCheck is the least time between two looks at the files' stamps: a burst of handshakes
// costs one stat per file.
const minCheck = time.Second

// KeyPair is a certificate and its key, read from two PEM files and read again when either
// changes. A file that cannot be read or a pair that does not match keeps the previous pair
// (the error is returned once, for the log). A KeyPair is safe for concurrent use.
type KeyPair struct {
	certFile, keyFile string

	mu        sync.Mutex
	checked   time.Time
	certStamp stamp
	keyStamp  stamp
	cert      *tls.Certificate
}

// LoadKeyPair reads the pair; an error names the file.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("certfile: a certificate and its key are both required")
	}
	kp := &KeyPair{certFile: certFile, keyFile: keyFile}
	if _, err := kp.reload(time.Now()); err != nil {
		return nil, err
	}
	return kp, nil
}

// Certificate returns the current pair, first reading the files again if they changed since
// the last look (at most once a second). err reports a change that could not be loaded;
// the certificate returned is then the previous one.
func (kp *KeyPair) Certificate() (*tls.Certificate, error) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	now := time.Now()
	if now.Sub(kp.checked) < minCheck {
		return kp.cert, nil
	}
	return kp.reload(now)
}

// reload reads the files if their stamps changed; kp.mu is held (or kp is new).
func (kp *KeyPair) reload(now time.Time) (*tls.Certificate, error) {
	kp.checked = now
	cs, err := stat(kp.certFile)
	if err != nil {
		return kp.cert, fmt.Errorf("certfile: certificate: %w", err)
	}
	ks, err := stat(kp.keyFile)
	if err != nil {
		return kp.cert, fmt.Errorf("certfile: key: %w", err)
	}
	if kp.cert != nil && cs == kp.certStamp && ks == kp.keyStamp {
		return kp.cert, nil
	}
	c, err := tls.LoadX509KeyPair(kp.certFile, kp.keyFile)
	if err != nil {
		// Kubernetes may be between writing the two files: look again at the next call.
		kp.certStamp, kp.keyStamp = stamp{}, stamp{}
		return kp.cert, fmt.Errorf("certfile: %s and %s: %w", kp.certFile, kp.keyFile, err)
	}
	kp.cert, kp.certStamp, kp.keyStamp = &c, cs, ks
	return kp.cert, nil
}

// Pool is a CA bundle read from a PEM file and read again when it changes. A Pool is safe
// for concurrent use.
type Pool struct {
	file string

	mu      sync.Mutex
	checked time.Time
	stamp   stamp
	pool    *x509.CertPool
}

// LoadPool reads the bundle; a file with no certificate is an error naming it.
func LoadPool(file string) (*Pool, error) {
	p := &Pool{file: file}
	if _, err := p.reload(time.Now()); err != nil {
		return nil, err
	}
	return p, nil
}

// CertPool returns the current bundle, first reading the file again if it changed (at most
// once a second); err reports a change that could not be loaded (the previous bundle is
// returned).
func (p *Pool) CertPool() (*x509.CertPool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.checked) < minCheck {
		return p.pool, nil
	}
	return p.reload(now)
}

func (p *Pool) reload(now time.Time) (*x509.CertPool, error) {
	p.checked = now
	s, err := stat(p.file)
	if err != nil {
		return p.pool, fmt.Errorf("certfile: CA bundle: %w", err)
	}
	if p.pool != nil && s == p.stamp {
		return p.pool, nil
	}
	data, err := os.ReadFile(p.file)
	if err != nil {
		return p.pool, fmt.Errorf("certfile: CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		p.stamp = stamp{}
		return p.pool, fmt.Errorf("certfile: CA bundle %s: no PEM certificate in it", p.file)
	}
	p.pool, p.stamp = pool, s
	return pool, nil
}
