package memcached

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/redact"
)

// maxIdleConns is the idle connections per server kept by the clients NewFromServers builds:
// gomemcache's default of 2 would make concurrent callers dial a connection per request.
const maxIdleConns = 64

// Store is the memcached store. It is safe for concurrent use. Build it with New,
// NewFromServers or NewFromURL and Close it when done.
type Store struct {
	client *memcache.Client
	owned  bool // Close closes client (NewFromServers, NewFromURL)
	cfg    config
	clock  sluice.Clock
	latest atomic.Int64 // the latest instant read from clock (Unix ns): windows never go back
	lanes  [laneShards]laneShard
	leases [laneShards]chan struct{} // serialise this process's lease rounds per key (leases.go)
	seed   maphash.Seed
	rules  algorithm.ParamsCache
	stats  counters
	closed atomic.Bool
	srv    func() // stops the SRV look-ups (WithSRV); nil without
}

var _ sluice.Store = (*Store)(nil)

// Stats are a Store's counts since it was built, for metrics and tests.
type Stats struct {
	// Decisions is the number of requests decided (denials included, errors not).
	Decisions int64
	// Rounds is the number of rounds: one incr (or one read) of the counter algorithms, one
	// gets/cas attempt of the others. Concurrent decisions on one key share a round.
	Rounds int64
	// CASConflicts is the number of gets/cas attempts that lost to another writer (a cas
	// answered EXISTS or NOT_FOUND, an add answered NOT_STORED) and were retried.
	CASConflicts int64
	// Contention is the number of decisions that failed with a *ContentionError.
	Contention int64
	// Overshoots is the number of counter increments undone by a decrement because the
	// requests they counted were denied; OvershootUnits the units they counted meanwhile
	// (see the package doc).
	Overshoots, OvershootUnits int64
}

type counters struct {
	decisions, rounds, conflicts, contention, overshoots, overshootUnits atomic.Int64
}

// New returns a Store deciding on client, whose servers, timeout and connection pool are the
// caller's: the store neither changes nor closes it. A client built by memcache.New spreads
// the items of one user key over its servers by their whole key; NewFromServers keeps them on
// one server. New does not contact memcached.
func New(client *memcache.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("memcached: New: client is nil")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return newStore(client, cfg, false), nil
}

// NewFromServers returns a Store on a client of its own for the servers at addrs (host:port,
// or a Unix socket path), which Close closes. Every item of one user key goes to one server
// (chosen by the CRC-32 of the key, as memcache.ServerList does), so a server that fails
// fails only its keys. Each round trip is bounded by the store's timeout (WithTimeout).
func NewFromServers(addrs []string, opts ...Option) (*Store, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, errors.New("memcached: servers: none given")
	}
	for _, a := range addrs {
		if strings.Contains(a, "/") {
			continue // a Unix socket
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("memcached: servers: %s is not host:port", redact.URL(a))
		}
	}
	sel, err := newSelector(cfg.serverList, addrs)
	if err != nil {
		return nil, fmt.Errorf("memcached: servers: %w", err)
	}
	client := memcache.NewFromSelector(sel)
	client.Timeout = cfg.timeout
	client.MaxIdleConns = maxIdleConns
	if cfg.tls != nil {
		client.DialContext = tlsDialer(cfg.tls, cfg.timeout)
	}
	st := newStore(client, cfg, true)
	st.srv = followSRV(cfg, sel.list, addrs)
	return st, nil
}

// NewFromURL returns NewFromServers for a URL "memcached://host:port[,host:port...]".
func NewFromURL(rawURL string, opts ...Option) (*Store, error) {
	rest, ok := strings.CutPrefix(rawURL, "memcached://")
	if !ok {
		return nil, fmt.Errorf("memcached: url: want memcached://host:port[,host:port...], got %s", redact.URL(rawURL))
	}
	if rest == "" || strings.ContainsAny(rest, "/?#@") {
		return nil, fmt.Errorf("memcached: url: want memcached://host:port[,host:port...] (no path, query or user), got %s", redact.URL(rawURL))
	}
	return NewFromServers(strings.Split(rest, ","), opts...)
}

func newConfig(opts []Option) (config, error) {
	cfg := config{
		timeout:     DefaultTimeout,
		prefix:      DefaultPrefix,
		maxBatch:    DefaultMaxBatch,
		maxAttempts: DefaultMaxAttempts,
		backoff:     DefaultBackoff,
	}
	for _, o := range opts {
		o.apply(&cfg)
	}
	switch {
	case cfg.timeout <= 0:
		return cfg, fmt.Errorf("memcached: WithTimeout: must be positive, got %v", cfg.timeout)
	case len(cfg.prefix) > maxPrefix || !legal(cfg.prefix) || strings.Contains(cfg.prefix, "|"):
		return cfg, fmt.Errorf("memcached: WithPrefix: want at most %d bytes without spaces, control characters or '|', got %q", maxPrefix, cfg.prefix)
	case cfg.maxKeyLen < 0:
		return cfg, fmt.Errorf("memcached: WithMaxKeyLength: must not be negative, got %d", cfg.maxKeyLen)
	case cfg.maxBatch <= 0:
		return cfg, fmt.Errorf("memcached: WithMaxBatch: must be positive, got %d", cfg.maxBatch)
	case cfg.maxAttempts <= 0:
		return cfg, fmt.Errorf("memcached: WithMaxAttempts: must be positive, got %d", cfg.maxAttempts)
	case cfg.backoff < 0:
		return cfg, fmt.Errorf("memcached: WithBackoff: must not be negative, got %v", cfg.backoff)
	}
	return cfg, nil
}

func newStore(client *memcache.Client, cfg config, owned bool) *Store {
	s := &Store{client: client, owned: owned, cfg: cfg, clock: cfg.clock, seed: maphash.MakeSeed()}
	if s.clock == nil {
		s.clock = sluice.SystemClock{}
	}
	for i := range s.leases {
		s.leases[i] = make(chan struct{}, 1)
	}
	for i := range s.lanes {
		s.lanes[i].m = make(map[string]*lane)
		s.lanes[i].memos = make(map[memoKey]*memo)
	}
	return s
}

// Client returns the store's gomemcache client.
func (s *Store) Client() *memcache.Client { return s.client }

// Key returns the base of the item keys holding a user key's state: the prefix and the key,
// or the key's hash (see the package doc). The items are Key + "|s" (token bucket, leaky
// bucket, GCRA, sliding log) and Key + "|w<window length ms>:<window index>" (window counters).
func (s *Store) Key(userKey string) string { return s.cfg.prefix + body(s.cfg.prefix, userKey) }

// Stats returns the store's counts so far.
func (s *Store) Stats() Stats {
	c := &s.stats
	return Stats{Decisions: c.decisions.Load(), Rounds: c.rounds.Load(), CASConflicts: c.conflicts.Load(),
		Contention: c.contention.Load(), Overshoots: c.overshoots.Load(), OvershootUnits: c.overshootUnits.Load()}
}

// Ping checks that every server answers (one round trip each, each bounded by the client's
// timeout); the error wraps sluice.ErrStoreUnavailable.
func (s *Store) Ping() error {
	if err := s.client.Ping(); err != nil {
		return unavailable(err)
	}
	return nil
}

// Close closes the client when the store built it (NewFromServers, NewFromURL), and stops
// the look-ups of WithSRV. Decisions
// after Close fail with sluice.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) || !s.owned {
		return nil
	}
	if s.srv != nil {
		s.srv()
	}
	return s.client.Close()
}

// now reads the clock: now as read (Unix ns), and the latest instant the store has read,
// which window counters are named by so that a clock stepping back never reopens an earlier
// window (see the package doc).
func (s *Store) now() (now, latest int64) {
	now = s.clock.Now().UnixNano()
	for {
		l := s.latest.Load()
		if now <= l {
			return now, l
		}
		if s.latest.CompareAndSwap(l, now) {
			return now, now
		}
	}
}

// Items written with a client clock (WithClock) live at least this long.
const clientClockMinTTL = 60

// monthSeconds is the longest relative expiration memcached accepts; longer ones are sent
// as absolute Unix times.
const monthSeconds = 30 * 24 * 3600

// expiration is the memcached expiration of an item needed for need more nanoseconds: whole
// seconds rounded up, plus one (memcached's clock ticks in seconds), and at least a minute
// with a client clock. Past 30 days it is an absolute Unix time of the real clock (at most
// 2^31-1, January 2038, where memcached's expirations end).
func (s *Store) expiration(need int64) int32 {
	secs := max(0, (need+int64(time.Second)-1)/int64(time.Second)) + 1
	if s.cfg.clock != nil {
		secs = max(secs, clientClockMinTTL)
	}
	if secs > monthSeconds {
		return int32(min(time.Now().Unix()+secs, math.MaxInt32)) // at most until 2038
	}
	return int32(secs)
}

// ContentionError reports a decision that lost its gets/cas round to other writers of the key
// as many times as the retry budget allows (WithMaxAttempts). It wraps
// sluice.ErrStoreUnavailable: the decision was not made, and the caller's failure policy
// applies (never a silent allow).
type ContentionError struct {
	Key      string
	Attempts int
}

func (e *ContentionError) Error() string {
	// Never the key: it may hold a request's value (an API key); Key has it for the caller.
	return fmt.Sprintf("memcached: %v: %d gets/cas rounds lost to other writers of the key", sluice.ErrStoreUnavailable, e.Attempts)
}

// Unwrap returns sluice.ErrStoreUnavailable.
func (e *ContentionError) Unwrap() error { return sluice.ErrStoreUnavailable }

func unavailable(err error) error {
	return fmt.Errorf("memcached: %w: %w", sluice.ErrStoreUnavailable, err)
}
