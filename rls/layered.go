package rls

import (
	"context"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/store/memory"
)

// localMark starts the store keys of per-instance limits (scope: local). No other key can
// start with it: domains and the keys of /v1/allow have no control characters
// (config.CheckKey).
const localMark = "\x00local|"

// layeredStore decides the keys of per-instance limits (those starting with localMark) on
// the instance's memory store and every other key on the shared store, so that one
// sluice.Limiter.AllowAll decides a descriptor's cluster and local limits together, all or
// nothing. It is safe for concurrent use.
type layeredStore struct {
	cluster sluice.Store
	local   *memory.Store
}

// Take implements sluice.Store.
func (s *layeredStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if strings.HasPrefix(req.Key, localMark) {
		return s.local.Take(ctx, req)
	}
	return s.cluster.Take(ctx, req)
}

// openLocal builds the per-instance store and the limiter deciding layered checks.
func (e *Engine) openLocal() error {
	opts := []memory.Option{memory.WithMaxKeyLength(e.maxKeyLen + len(localMark))}
	if c := e.cfg.StoreConfig.Clock; c != nil {
		opts = append(opts, memory.WithClock(c))
	}
	local, err := memory.New(opts...)
	if err != nil {
		return err
	}
	e.localStore = local
	e.layered = sluice.New(&layeredStore{cluster: e.store, local: local})
	return nil
}

// checkKey is the store key of the i-th rule of limit l on key: a per-instance limit's key
// is marked for the layered store.
func checkKey(l *config.Limit, key string, i int) string {
	k := ruleKey(key, i)
	if l != nil && l.IsLocal(i) {
		return localMark + k
	}
	return k
}

// limiterFor is the limiter of a group of checks: the layered one when a check is a
// per-instance limit, else the store's own (which keeps the memory store's fast path).
func (e *Engine) limiterFor(checks []sluice.Check) *sluice.Limiter {
	for i := range checks {
		if strings.HasPrefix(checks[i].Key, localMark) {
			return e.layered
		}
	}
	return e.limiter
}
