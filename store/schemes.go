package store

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/store/memcached"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/redis"
)

// closingStore is a store that Close releases: a store a backend opens (with its client)
// or a decorator.
type closingStore interface {
	sluice.Store
	io.Closer
}

// backend opens the stores of some URL schemes, honouring the fields of Config that concern
// the store itself (URL, Timeout, Clock, Prefix, Ping).
type backend struct {
	schemes []string
	open    func(ctx context.Context, c Config) (closingStore, error)
	// unsupported gives the modes the store cannot serve, each with why, in the words of
	// docs/MODES.md's table of stores and modes (a test holds them equal).
	unsupported map[string]string
}

// backends are the stores Open knows, in the order errors list their schemes. A new store
// adds its entry here.
var backends = []backend{
	{schemes: []string{"memory"}, open: openMemory},
	{schemes: []string{"redis", "rediss", "redis-cluster", "redis-sentinel"}, open: openRedis},
	{schemes: []string{"memcached"}, open: openMemcached, unsupported: map[string]string{
		"async": "async needs window counters added and read in one round trip (sluice.WindowCounter), which memcached lacks; use sync or overlimit",
	}},
}

// backendOf returns the backend of scheme, or nil.
func backendOf(scheme string) *backend {
	for i := range backends {
		for _, s := range backends[i].schemes {
			if s == scheme {
				return &backends[i]
			}
		}
	}
	return nil
}

// Scheme returns the scheme of a store URL: "memory" for "", "memory" and "memory://",
// otherwise the part before "://". A missing or unknown scheme is an error listing the known
// ones; the rest of the URL is checked when the store opens.
func Scheme(rawURL string) (string, error) {
	if rawURL == "" || rawURL == "memory" {
		return "memory", nil
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	switch {
	case !ok:
		return "", fmt.Errorf("store: url: scheme: missing (want memory, or scheme://... with scheme one of %s)", schemeList())
	case backendOf(scheme) == nil:
		return "", fmt.Errorf("store: url: scheme: unknown %q (want %s)", redact.Scheme(scheme), schemeList())
	case scheme == "memory" && rest != "":
		return "", fmt.Errorf("store: url: memory takes nothing after memory://, got %s", Redact(rawURL))
	}
	return scheme, nil
}

// schemeList lists the known schemes for an error message: "a, b or c".
func schemeList() string {
	var all []string
	for _, b := range backends {
		all = append(all, b.schemes...)
	}
	return strings.Join(all[:len(all)-1], ", ") + " or " + all[len(all)-1]
}

func openMemory(_ context.Context, c Config) (closingStore, error) {
	var opts []memory.Option
	if c.Clock != nil {
		opts = append(opts, memory.WithClock(c.Clock))
	}
	if c.MemoryMaxBytes > 0 {
		opts = append(opts, memory.WithMaxBytes(c.MemoryMaxBytes))
	}
	st, err := memory.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return st, nil
}

func openRedis(ctx context.Context, c Config) (closingStore, error) {
	opts, err := sharedOptions(c, redis.WithTimeout, redis.WithClock, redis.WithPrefix, redis.WithTLS)
	if err != nil {
		return nil, err
	}
	st, err := redis.NewFromURL(c.URL, opts...) // owns its client: Close closes it
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if c.Ping {
		if err := st.Client().Ping(ctx).Err(); err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("store: ping: %w: %w", sluice.ErrStoreUnavailable, err)
		}
	}
	return st, nil
}

func openMemcached(_ context.Context, c Config) (closingStore, error) {
	opts, err := sharedOptions(c, memcached.WithTimeout, memcached.WithClock, memcached.WithPrefix, memcached.WithTLS)
	if err != nil {
		return nil, err
	}
	if c.MemcachedSRV != "" && c.MemcachedSRVRefresh > 0 {
		opts = append(opts, memcached.WithSRV(memcached.SRV{Name: c.MemcachedSRV, Every: c.MemcachedSRVRefresh, Logger: c.Logger}))
	}
	st, err := memcached.NewFromURL(c.URL, opts...) // owns its client: Close closes it
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if c.Ping {
		if err := st.Ping(); err != nil { // bounded by the client's timeout, not ctx
			_ = st.Close()
			return nil, fmt.Errorf("store: ping: %w", err)
		}
	}
	return st, nil
}

// sharedOptions returns a shared store's options for the fields of c set: its timeout, clock,
// prefix and TLS options (an error when the TLS files cannot be read).
func sharedOptions[O any](c Config, timeout func(time.Duration) O, clock func(sluice.Clock) O, prefix func(string) O,
	withTLS func(*tls.Config) O) ([]O, error) {
	tc, err := c.TLS.ClientConfig()
	if err != nil {
		return nil, err
	}
	opts := []O{withTLS(tc)}
	if c.Timeout > 0 {
		opts = append(opts, timeout(c.Timeout))
	}
	if c.Clock != nil {
		opts = append(opts, clock(c.Clock))
	}
	if c.Prefix != "" {
		opts = append(opts, prefix(c.Prefix))
	}
	return opts, nil
}
