package memcached

import (
	"crypto/tls"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/sluicehq/sluice"
)

// Defaults for the options.
const (
	DefaultTimeout     = 250 * time.Millisecond
	DefaultPrefix      = "sluice:"
	DefaultMaxBatch    = 128
	DefaultMaxAttempts = 8
	DefaultBackoff     = 100 * time.Microsecond
	// maxPrefix bounds WithPrefix, so that a prefix, a user key of up to maxRawKey bytes and
	// an item suffix always fit memcached's 250-byte keys.
	maxPrefix = 64
)

// Option configures a Store.
type Option interface{ apply(*config) }

type config struct {
	clock       sluice.Clock
	timeout     time.Duration
	prefix      string
	maxKeyLen   int
	maxBatch    int
	maxAttempts int
	backoff     time.Duration
	tls         *tls.Config
	serverList  *memcache.ServerList // WithServerList; nil: one of the store's own
	srv         SRV                  // WithSRV
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithClock sets the clock decisions read (default sluice.SystemClock). Tests pass a
// sluicetest.ManualClock. Every item then lives at least one minute of the server's time, since
// memcached expires items on its own clock and a manual clock may stand still for longer than
// a state needs.
func WithClock(c sluice.Clock) Option { return optionFunc(func(cfg *config) { cfg.clock = c }) }

// WithTimeout bounds every decision (default DefaultTimeout): the wait of a caller, and each
// round trip to memcached (the socket deadline of the clients NewFromServers builds). The
// caller's context, when it ends sooner, bounds the caller's wait too.
func WithTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.timeout = d }) }

// WithPrefix sets the prefix of every item key (default DefaultPrefix): at most 64 bytes with
// no space, control character or '|'.
func WithPrefix(p string) Option { return optionFunc(func(c *config) { c.prefix = p }) }

// WithMaxKeyLength sets the longest accepted user key in bytes (default
// sluice.DefaultMaxKeyLength). Keys that do not fit memcached's 250 bytes are hashed (see the
// package doc), so any length can be accepted.
func WithMaxKeyLength(n int) Option { return optionFunc(func(c *config) { c.maxKeyLen = n }) }

// WithMaxBatch sets how many concurrent decisions on one key may share one round (one
// gets/cas, or one incr), default DefaultMaxBatch; 1 decides every request on its own round.
func WithMaxBatch(n int) Option { return optionFunc(func(c *config) { c.maxBatch = n }) }

// WithMaxAttempts sets the retry budget of the bucket algorithms' and the sliding log's
// gets/cas loop (default DefaultMaxAttempts): how many rounds a decision may take before it
// fails with a *ContentionError.
func WithMaxAttempts(n int) Option { return optionFunc(func(c *config) { c.maxAttempts = n }) }

// WithBackoff sets the base pause after a CAS conflict (default DefaultBackoff): the pause
// after the k-th conflict is drawn uniformly from [0, base x 2^(k-1)), capped at 32 x base,
// and never past the decision's timeout.
func WithBackoff(d time.Duration) Option { return optionFunc(func(c *config) { c.backoff = d }) }

// WithTLS makes the client NewFromServers (and NewFromURL) builds connect to every server over
// TLS with c (memcached -Z); an empty c.ServerName is the host of each server, a nil c
// is plain text. New, given its
// client, ignores it: set the client's DialContext instead.
func WithTLS(c *tls.Config) Option { return optionFunc(func(cfg *config) { cfg.tls = c }) }
