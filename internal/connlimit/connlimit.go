// Package connlimit bounds the connections a listener holds open at once: one accepted beyond
// the bound is closed at once, instead of blocking Accept (which would let idle connections
// keep every new client waiting, and leave the file descriptors of the process to whoever
// connects). sluice serve's HTTP port and sluice proxy's ports use it.
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Listener returns l bounded to max connections open at once; refused, when not nil, is called
// for each connection closed for being over the bound.
func Listener(l net.Listener, max int, refused func()) net.Listener {
	return &listener{Listener: l, max: int64(max), refused: refused}
}

type listener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused func()
}

// Accept returns the next connection within the limit; connections over it are closed.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			c.Close()
			if l.refused != nil {
				l.refused()
			}
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// countedConn gives its slot back once, on the first Close.
type countedConn struct {
	net.Conn
	l    *listener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
