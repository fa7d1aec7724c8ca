package redis

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"time"
)

// RedialInterval is how often the pool of a single-node or Sentinel client that NewFromURL
// builds re-dials a Redis that refuses connections, once the pool has stopped dialing on callers'
// behalf: decisions come back within RedialInterval plus a round trip of Redis accepting
// connections again. go-redis alone re-dials once a second.
const RedialInterval = 10 * time.Millisecond

// defaultDialTimeout bounds each dial of NewFromURL's clients without dial_timeout: go-redis's
// default.
const defaultDialTimeout = 5 * time.Second

// redialer is the Dialer of the single-node and Sentinel clients NewFromURL builds, so that
// decisions come back within RedialInterval plus a round trip of Redis accepting connections
// again.
//
// go-redis's pool (internal/pool, ConnPool.dialConn), after PoolSize failed dials, stops
// dialing: every call that needs a connection fails at once with the last dial error, and a
// background goroutine (ConnPool.tryDial) re-dials, sleeping one second after each failure,
// until a dial succeeds. No option changes that second (DialerRetries and DialerRetryBackoff
// space the attempts within one dial; the pool has no way to stop caching the error), so a
// restarted Redis waited up to a second for its clients. The redialer keeps the part worth
// keeping, failing callers at once without a dial (or a log line) each while Redis is down,
// and turns the background re-dial into a poll every RedialInterval: when that goroutine is
// the caller and its dial fails, the redialer dials again every RedialInterval, past the
// dial's deadline, until a dial succeeds or the store is closed, so the pool starts dialing
// again as soon as Redis accepts a connection. Other dials fail at once (NewFromURL sets
// DialerRetries to 1).
//
// Behind Sentinel the address to poll changes with a failover (go-redis resolves it before it
// calls the Dialer, once per dial), so there each poll asks the Sentinels for the primary
// (sentinelResolver) and dials that: decisions come back within RedialInterval plus a
// Sentinel query and a round trip of the new primary being announced, not up to a second
// later. A Cluster
// node's pool may be closed, while a poll runs, by a topology change the redialer would not
// see, so Cluster clients do not use it.
type redialer struct {
	next     func(ctx context.Context, network, addr string) (net.Conn, error)
	sentinel *sentinelResolver // nil: poll the address dialed
	stop     chan struct{}
	once     sync.Once
}

func newRedialer(next func(ctx context.Context, network, addr string) (net.Conn, error)) *redialer {
	return &redialer{next: next, stop: make(chan struct{})}
}

// dial is the client's Dialer.
func (r *redialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := r.next(ctx, network, addr)
	if err == nil || !poolRedial() {
		return c, err
	}
	tick := time.NewTicker(RedialInterval)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return nil, err
		case <-tick.C:
		}
		// The pool's deadline for this dial may have passed: each attempt is bounded by the
		// dialer's own timeout (net.Dialer.Timeout, the client's DialTimeout).
		if r.sentinel != nil {
			ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
			a, rerr := r.sentinel.primary(ctx)
			cancel()
			if rerr != nil {
				continue
			}
			addr = a
		}
		if c, err = r.next(context.Background(), network, addr); err == nil {
			return c, nil
		}
	}
}

// resolveTimeout bounds each question to the Sentinels during a poll.
const resolveTimeout = 100 * time.Millisecond

// close ends a poll under way (the store is closing its client) and closes the Sentinel
// clients of the resolver.
func (r *redialer) close() {
	r.once.Do(func() {
		close(r.stop)
		if r.sentinel != nil {
			r.sentinel.close()
		}
	})
}

// poolRedial reports whether the caller is go-redis's pool re-dialing in the background
// after it stopped dialing for callers (internal/pool.(*ConnPool).tryDial), the only dial it
// makes in that state. The frames are read only after a failed dial.
func poolRedial() bool {
	var pcs [16]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs[:])])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "/internal/pool.(*ConnPool).tryDial") {
			return true
		}
		if !more {
			return false
		}
	}
}
