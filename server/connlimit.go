package server

import (
	"net"
	"sync"
	"sync/atomic"
)

// connLimitListener closes connections accepted beyond max open ones at once, instead of
// blocking Accept (which would let idle connections keep every new client waiting).
type connLimitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

func limitConns(l net.Listener, max int) net.Listener {
	return &connLimitListener{Listener: l, max: int64(max)}
}

// Accept returns the next connection within the limit; connections over it are closed.
func (l *connLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// countedConn gives its slot back once, on the first Close.
type countedConn struct {
	net.Conn
	l    *connLimitListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
