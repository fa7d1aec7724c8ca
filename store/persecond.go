package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

// perSecond sends the decisions of one-second rules to a store of their own and the rest to
// the main store: envoyproxy/ratelimit's REDIS_PERSECOND, a second Redis that takes the
// per-second limits' many short-lived keys off the main one (Config.PerSecondURL). Both
// stores have the same mode and fallback, each its own.
type perSecond struct {
	main, second sluice.Store
}

// openPerSecond opens the store of c.PerSecondURL and routes st's one-second decisions to it.
func openPerSecond(ctx context.Context, c Config, st sluice.Store, closers *chain) (sluice.Store, error) {
	c2 := c
	c2.URL, c2.PerSecondURL, c2.MemcachedSRV = c.PerSecondURL, "", ""
	second, closer, err := Open(ctx, c2)
	if err != nil {
		return nil, fmt.Errorf("store: per-second store: %w", err)
	}
	*closers = append(chain{closer}, *closers...)
	return perSecond{main: st, second: second}, nil
}

// Take decides on the second store when the rule's period is one second.
func (p perSecond) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if req.Rule.Period == time.Second {
		return p.second.Take(ctx, req)
	}
	return p.main.Take(ctx, req)
}

// Flush flushes both stores.
func (p perSecond) Flush(ctx context.Context) error {
	var errs []error
	for _, s := range []sluice.Store{p.main, p.second} {
		if f, ok := s.(sluice.Flusher); ok {
			errs = append(errs, f.Flush(ctx))
		}
	}
	return errors.Join(errs...)
}
