package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
)

// Config says which store Open opens and how decisions are distributed over it: the store
// itself (Backend: its URL and what every backend's client takes) apart from the decorators
// Open puts in front of it (Decorators: the distribution mode and the fallback). Both are
// embedded, so their fields read as Config's own (c.URL, c.Mode). The zero Config is a
// memory store in sync mode without fallback. A Config is plain data.
type Config struct {
	Backend
	Decorators
}

// Backend says which store Open opens and how its client connects.
type Backend struct {
	// URL names the store: "memory" (the default, also "" and "memory://"), or a Redis URL
	// as redis.NewFromURL reads it: "redis://[user:pass@]host:port[/db]" or "rediss://..."
	// (TLS) for one Redis; "redis-cluster://host:port,host:port" for Redis Cluster;
	// "redis-sentinel://host:port,host:port/MASTER" for a Sentinel-managed primary. Query
	// parameters: db, dial_timeout, pool_size (and username, password for Sentinel's data
	// nodes). "memcached://host:port,host:port" for memcached (memcached.NewFromURL). Schemes
	// lists the schemes.
	URL string
	// PerSecondURL, when set, is a second store (same schemes as URL, same mode and
	// fallback) that decides the rules of a one-second period: envoyproxy/ratelimit's
	// REDIS_PERSECOND_URL.
	PerSecondURL string
	// Timeout bounds each store call (Redis, memcached; 0: their DefaultTimeout). A call that
	// takes longer fails as the store being unavailable. Keep it below the timeout of the
	// callers (Envoy's rate limit filter: 20 ms by default). The memory store ignores it.
	// With a Fallback, a set Timeout is also the fallback's (distributed.WithTimeout): a call
	// slower than it is decided by the policy. 0 leaves the fallback its
	// DefaultFallbackTimeout, shorter than the stores' default.
	Timeout time.Duration
	// Clock, when set, is the time of the store and the decorators: the memory store's
	// clock, and on Redis the client time the scripts decide on instead of the server's
	// TIME (every client of the keys must then agree on time). Default: the system clock
	// (Redis: the server's).
	Clock sluice.Clock
	// Prefix, when set, is the prefix of every key in a shared store (Redis: default
	// redis.DefaultPrefix). The memory store, private to its process, ignores it.
	Prefix string
	// Ping makes Open check that the store answers (one round trip, bounded by Open's
	// context) and fail if it does not. Without it clients connect on first use, so a
	// service can start while its store is down, and fall back.
	Ping bool
	// TLS configures TLS on every connection to Redis (one server, Sentinels and the primary,
	// Cluster nodes) and memcached: authorities, client certificate, server name (see TLS).
	// The zero TLS leaves the URL's scheme to decide (rediss:// is TLS with the system roots).
	// The memory store ignores it.
	TLS ClientTLS
	// MemoryMaxBytes bounds the bytes the memory store's keys hold (memory.WithMaxBytes; 0:
	// memory.DefaultMaxBytes). The other stores ignore it.
	MemoryMaxBytes int64
	// MemcachedSRV, with a memcached:// URL and a positive MemcachedSRVRefresh, is a DNS SRV
	// record the store follows: looked up again every MemcachedSRVRefresh, its targets become
	// the store's servers when they change (memcached.WithSRV; envoyproxy/ratelimit's
	// MEMCACHE_SRV and MEMCACHE_SRV_REFRESH). The URL holds the servers to start with. The
	// per-second store does not follow it.
	MemcachedSRV        string
	MemcachedSRVRefresh time.Duration
	// Logger receives the store's own lines (the SRV refresh's); default: discard.
	Logger *slog.Logger
}

// Decorators say how decisions are distributed over the store and what happens when it
// fails: the decorators of package distributed Open puts in front of it.
type Decorators struct {
	// Mode is the distribution mode: "sync" (the default, also ""; one store call per
	// decision), "overlimit" (keys already over their limit are denied locally until they
	// reset: distributed.NewOverLimit) or "async" (local counters synchronised in the
	// background, bounded over-admission: distributed.NewAsync).
	Mode string
	// Fallback names the failure policy while the store is unavailable (a
	// distributed.FailurePolicy, read by distributed.ParseFailurePolicy, applied by
	// distributed.NewFallback): "" (none: decisions fail with sluice.ErrStoreUnavailable),
	// "local" (a local limiter keeping the global budget), "fail_open" or "fail_closed".
	Fallback string
	// OnCircuitChange, when set with a Fallback, is called on every change of the fallback's
	// state (distributed.OnCircuitChange): CircuitClosed to CircuitOpen when the store fails,
	// back when a probe answers. It runs in the goroutine that changes the state and must not
	// block. Without a Fallback it is never called.
	OnCircuitChange func(from, to distributed.Circuit)
	// OnStoreError, when set with a Fallback, is called with every store failure the
	// fallback absorbs (distributed.OnStoreError): decisions it answered by policy because
	// the store failed or was too slow, and failed probes and heartbeats. Failures without a
	// fallback are returned by Take instead. It must not block.
	OnStoreError func(err error)
}

// Validate reports every invalid field of c, each error naming its field (url, mode,
// fallback, timeout, tls), without opening anything (it reads the TLS files).
func (c Config) Validate() error {
	var errs []error
	if _, err := Scheme(c.URL); err != nil {
		errs = append(errs, err)
	}
	if _, err := Scheme(c.PerSecondURL); c.PerSecondURL != "" && err != nil {
		errs = append(errs, fmt.Errorf("store: per-second store: %w", err))
	}
	if err := CheckMode(c.Mode); err != nil {
		errs = append(errs, fmt.Errorf("store: mode: %w", err))
	}
	if err := CheckModeOn(c.URL, c.Mode); err != nil {
		errs = append(errs, fmt.Errorf("store: mode: %w", err))
	}
	if err := CheckFallback(c.Fallback); err != nil {
		errs = append(errs, fmt.Errorf("store: fallback: %w", err))
	}
	if c.MemoryMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("store: memory max bytes: must not be negative, got %d", c.MemoryMaxBytes))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("store: timeout: must not be negative, got %v", c.Timeout))
	}
	if c.MemcachedSRVRefresh < 0 {
		errs = append(errs, fmt.Errorf("store: memcached srv refresh: must not be negative, got %v", c.MemcachedSRVRefresh))
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CheckMode returns an error unless mode is a distribution mode Open knows ("" is sync).
// The error does not name the field, so a caller can prefix its own name (--mode,
// SLUICE_MODE).
func CheckMode(mode string) error {
	switch mode {
	case "", "sync", "overlimit", "async":
		return nil
	}
	return fmt.Errorf("unknown distribution mode %q (want sync, overlimit or async)", mode)
}

// CheckModeOn returns an error when the store of url cannot serve mode, saying why in the
// words of docs/MODES.md's table of stores and modes (memcached has no async mode). An
// unknown scheme or mode is not its concern (Scheme, CheckMode). Like CheckMode, the error
// does not name the field.
func CheckModeOn(url, mode string) error {
	scheme, err := Scheme(url)
	if err != nil {
		return nil
	}
	if why, ok := backendOf(scheme).unsupported[mode]; ok {
		return fmt.Errorf("mode %s is not supported on %s: %s", mode, scheme, why)
	}
	return nil
}

// CheckFallback returns an error unless policy names a distributed.FailurePolicy ("" is
// none), without naming the field (see CheckMode).
func CheckFallback(policy string) error {
	if policy == "" {
		return nil
	}
	if _, err := distributed.ParseFailurePolicy(policy); err != nil {
		return fmt.Errorf("unknown fallback policy %q (want local, fail_open or fail_closed, or empty for none)", policy)
	}
	return nil
}

// Open validates c (see Validate), then opens the store c.URL names, wraps it in the
// decorator of c.Mode and then in the fallback of c.Fallback, and returns the outermost
// store with the Closer that releases them all: it closes the decorators from the outside
// in (each flushing what it holds, such as async counts not yet synchronised) and then the
// store, which closes its client. Close it once, after the last decision. Invalid fields
// are errors naming them, before anything is opened; a failure later closes what was
// opened. ctx bounds the work Open does before returning (the Ping check); the store does
// not keep it. Open is safe for concurrent use.
func Open(ctx context.Context, c Config) (sluice.Store, io.Closer, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	scheme, _ := Scheme(c.URL)
	base, err := backendOf(scheme).open(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	closers := chain{base}
	st, err := decorate(base, c, &closers)
	if err == nil && c.PerSecondURL != "" {
		st, err = openPerSecond(ctx, c, st, &closers)
	}
	if err != nil {
		_ = closers.Close()
		return nil, nil, err
	}
	return st, closers, nil
}

// decorate wraps st in the decorator of c.Mode, if any, and then in the fallback of
// c.Fallback, if any, putting each in front of closers.
func decorate(st sluice.Store, c Config, closers *chain) (sluice.Store, error) {
	var d closingStore
	var err error
	switch c.Mode {
	case "overlimit":
		d, err = distributed.NewOverLimit(st, withClock(c.Clock, distributed.WithClock)...)
	case "async":
		d, err = distributed.NewAsync(st, withClock(c.Clock, distributed.WithClock)...)
	}
	if err != nil {
		return nil, fmt.Errorf("store: mode %s: %w", c.Mode, err)
	}
	if d != nil {
		st, *closers = d, append(chain{d}, *closers...)
	}
	if c.Fallback == "" {
		return st, nil
	}
	p, _ := distributed.ParseFailurePolicy(c.Fallback) // valid: Open checked it
	opts := append(withClock(c.Clock, distributed.WithClock), distributed.WithFailurePolicy(p))
	if c.Timeout > 0 {
		opts = append(opts, distributed.WithTimeout(c.Timeout))
	}
	if c.OnCircuitChange != nil {
		opts = append(opts, distributed.OnCircuitChange(c.OnCircuitChange))
	}
	if c.OnStoreError != nil {
		opts = append(opts, distributed.OnStoreError(c.OnStoreError))
	}
	fb, err := distributed.NewFallback(st, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: fallback: %w", err)
	}
	*closers = append(chain{fb}, *closers...)
	return fb, nil
}

// withClock returns a decorator's clock option set to clock, or none when clock is nil.
func withClock[O any](clock sluice.Clock, option func(sluice.Clock) O) []O {
	if clock == nil {
		return nil
	}
	return []O{option(clock)}
}

// chain closes a store and its decorators, outermost first.
type chain []io.Closer

// Close closes every element in order, even when one fails, and joins their errors.
func (ch chain) Close() error {
	var errs []error
	for _, c := range ch {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
