package redis

import (
	"crypto/tls"
	"time"

	"github.com/sluicehq/sluice"
)

// Defaults for the options.
const (
	DefaultTimeout     = 250 * time.Millisecond
	DefaultPrefix      = "sluice:"
	DefaultMaxBatch    = 128
	DefaultMaxInFlight = 2
	// maxMaxBatch and maxMaxInFlight bound the options: each pipeline in flight holds a
	// batcher of maxBatch calls and a connection.
	maxMaxBatch    = 1 << 16
	maxMaxInFlight = 1 << 10
)

// Option configures a Store.
type Option interface{ apply(*config) }

type config struct {
	clock       sluice.Clock
	timeout     time.Duration
	prefix      string
	maxKeyLen   int
	maxBatch    int
	maxDelay    time.Duration
	maxInFlight int
	noDirect    bool // no direct path, and every pipeline sent by a goroutine of its own (tests)
	tls         *tls.Config
	counters    bool // WithCounters
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithClock makes the scripts use c's time, passed with each call, instead of the Redis
// server's TIME. Tests pass a sluicetest.ManualClock; every client sharing keys must then have
// synchronised clocks. Keys then live at least one minute, since the server expires them on
// its own clock; a key rewritten without a new TTL (see the package doc) keeps the one set
// last, so a clock that stands still for more than a minute of real time, as a test's manual
// clock may, can see a key expire under it.
func WithClock(c sluice.Clock) Option { return optionFunc(func(cfg *config) { cfg.clock = c }) }

// WithTimeout bounds every decision (default DefaultTimeout); the caller's context, when it
// ends sooner, bounds it too.
func WithTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.timeout = d }) }

// WithPrefix sets the prefix of every key (default DefaultPrefix). It must not contain '{'
// or '}', which would choose the Cluster slot.
func WithPrefix(p string) Option { return optionFunc(func(c *config) { c.prefix = p }) }

// WithMaxKeyLength sets the longest accepted user key in bytes (default
// sluice.DefaultMaxKeyLength).
func WithMaxKeyLength(n int) Option { return optionFunc(func(c *config) { c.maxKeyLen = n }) }

// WithMaxBatch sets how many concurrent decisions may share one pipeline, and so one batched
// script call (default DefaultMaxBatch, at most 65,536); 1 sends every decision on its own.
func WithMaxBatch(n int) Option { return optionFunc(func(c *config) { c.maxBatch = n }) }

// WithMaxBatchDelay sets how long a pipeline may wait for more decisions before it is sent
// (default 0: send at once what has queued up while the previous pipelines were in flight).
func WithMaxBatchDelay(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxDelay = d })
}

// WithMaxInFlight sets how many pipelines may be in flight at once (default
// DefaultMaxInFlight, at most 1,024); each holds one connection of the client's pool. Fewer
// pipelines in flight make fuller ones: fewer script calls, each deciding more keys, which
// costs Redis less CPU per decision.
func WithMaxInFlight(n int) Option { return optionFunc(func(c *config) { c.maxInFlight = n }) }

// WithCounters keeps the fixed and sliding windows as plain counters, one Redis integer per
// window (or sub-window), and decides them without Lua: INCRBY with PEXPIRE NX, and the
// sliding window's previous sub-windows read with MGET, in one pipeline (with TIME, for the
// server's clock), decided by package algorithm on the counts read and followed by a DECRBY
// of what a denial gives back (see plain.go for what a decision sees and where counters
// differ from the scripts' states). It costs Redis about what envoyproxy/ratelimit's INCRBY
// and EXPIRE do instead of a script call. Every store sharing a Redis must choose alike: the
// counters and the scripts' states are different keys. The other algorithms keep their
// scripts. Not on a Redis Cluster with the server's clock (TIME must come from the key's
// node): give WithClock there.
func WithCounters() Option { return optionFunc(func(c *config) { c.counters = true }) }

// WithTLS makes the clients NewFromURL builds connect over TLS with c, whatever the URL's
// scheme: to one Redis, to each Sentinel and the primary it names, to each Cluster node. An
// empty c.ServerName is the host of each address dialed. Without it only rediss:// uses TLS
// (verifying the server with the system roots); so does a nil c. New, given its client,
// ignores it.
func WithTLS(c *tls.Config) Option { return optionFunc(func(cfg *config) { cfg.tls = c }) }
