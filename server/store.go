package server

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/redis"
)

// StoreOptions say which store to open and how to distribute decisions over it.
type StoreOptions struct {
	// URL names the store: "memory" (default, also "" and "memory://"), or a Redis URL as
	// redis.NewFromURL reads it: "redis://[user:pass@]host:port[/db]" or "rediss://..."
	// (TLS) for one Redis; "redis-cluster://host:port,host:port" for Redis Cluster;
	// "redis-sentinel://host:port,host:port/MASTER" for a Sentinel-managed primary. Query
	// parameters: db, dial_timeout, pool_size (and username, password for Sentinel's data
	// nodes).
	URL string
	// Mode is the distribution mode: "sync" (default: one store call per decision),
	// "overlimit" (keys already over their limit are denied locally until they reset) or
	// "async" (local counters synchronised in the background; bounded over-admission).
	Mode string
	// Timeout bounds each store call (Redis stores; default redis.DefaultTimeout). A call
	// that takes longer fails as the store being unavailable. Keep it below the timeout of
	// the callers (Envoy's rate limit filter: 20 ms by default).
	Timeout time.Duration
	// Fallback is the policy while the store is unavailable: "" (none: requests fail with
	// UNAVAILABLE and Envoy applies failure_mode_deny), "local" (a local limiter keeping the
	// global budget), "fail_open" or "fail_closed".
	Fallback string
}

// openedStore is a store with the decorators and clients to close, outermost first.
type openedStore struct {
	sluice.Store
	closers []func() error
}

// Close closes decorators (flushing them), then the store, then its client.
func (o *openedStore) Close() error {
	var errs []error
	for _, c := range o.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// CheckMode returns an error unless mode is a distribution mode OpenStore knows ("" is
// sync). The error does not name the option, so a caller can prefix its own name
// (--mode, SLUICE_MODE).
func CheckMode(mode string) error {
	switch mode {
	case "", "sync", "overlimit", "async":
		return nil
	}
	return fmt.Errorf("unknown distribution mode %q (want sync, overlimit or async)", mode)
}

// CheckFallback returns an error unless policy is a fallback policy OpenStore knows ("" is
// none), without naming the option (see CheckMode).
func CheckFallback(policy string) error {
	if policy == "" {
		return nil
	}
	if _, err := distributed.ParsePolicy(policy); err != nil {
		return fmt.Errorf("unknown fallback policy %q (want local, fail_open or fail_closed, or empty for none)", policy)
	}
	return nil
}

// OpenStore opens the store and decorators described by opts. Close the result (it
// implements sluice.Closer) to flush decorators and release connections. Invalid options
// are errors that name them, before anything is opened.
func OpenStore(opts StoreOptions) (sluice.Store, error) {
	if err := CheckMode(opts.Mode); err != nil {
		return nil, fmt.Errorf("server: mode: %w", err)
	}
	if err := CheckFallback(opts.Fallback); err != nil {
		return nil, fmt.Errorf("server: fallback: %w", err)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("server: store timeout: must not be negative, got %v", opts.Timeout)
	}
	base, closers, err := openBase(opts.URL, opts.Timeout)
	if err != nil {
		return nil, err
	}
	o := &openedStore{Store: base, closers: closers}
	fail := func(err error) (sluice.Store, error) { _ = o.Close(); return nil, err }
	switch opts.Mode {
	case "overlimit":
		d, err := distributed.NewOverLimit(o.Store)
		if err != nil {
			return fail(fmt.Errorf("server: mode overlimit: %w", err))
		}
		o.Store, o.closers = d, append([]func() error{d.Close}, o.closers...)
	case "async":
		d, err := distributed.NewAsync(o.Store)
		if err != nil {
			return fail(fmt.Errorf("server: mode async: %w", err))
		}
		o.Store, o.closers = d, append([]func() error{d.Close}, o.closers...)
	}
	if opts.Fallback != "" {
		p, err := distributed.ParsePolicy(opts.Fallback)
		if err != nil {
			return fail(fmt.Errorf("server: fallback: %w", err))
		}
		d, err := distributed.NewFallback(o.Store, distributed.WithPolicy(p))
		if err != nil {
			return fail(fmt.Errorf("server: fallback: %w", err))
		}
		o.Store, o.closers = d, append([]func() error{d.Close}, o.closers...)
	}
	return o, nil
}

func openBase(rawURL string, timeout time.Duration) (sluice.Store, []func() error, error) {
	scheme, _, _ := strings.Cut(rawURL, "://")
	switch scheme {
	case "", "memory":
		st, err := memory.New()
		if err != nil {
			return nil, nil, err
		}
		return st, []func() error{st.Close}, nil
	case "redis", "rediss", "redis-cluster", "redis-sentinel":
		var opts []redis.Option
		if timeout > 0 {
			opts = append(opts, redis.WithTimeout(timeout))
		}
		st, err := redis.NewFromURL(rawURL, opts...) // owns its client: Close closes it
		if err != nil {
			return nil, nil, fmt.Errorf("server: store: %w", err)
		}
		return st, []func() error{st.Close}, nil
	}
	return nil, nil, fmt.Errorf("server: store: unknown scheme %q (want memory, redis://, rediss://, redis-cluster:// or redis-sentinel://)", scheme)
}
