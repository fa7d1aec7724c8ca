package rls

import (
	"context"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/store/memory"
)

// localMark starts the store keys of per-instance limits (scope: local), globalMark those of
// the limits of every region (scope: global). No other key can start with them: domains
// and the keys of /v1/allow have no control characters (config.CheckKey).
const (
	localMark  = "\x00local|"
	globalMark = "\x00global|"
)

// layeredStore decides the keys of per-instance limits (those starting with localMark) on
// the instance's memory store, those of global limits (globalMark) on the regions' store
// (Config.GlobalStore; the shared store without one), the mark left out, and every other
// key on the shared store, so that one sluice.Limiter.AllowAll decides a descriptor's
// cluster, global and local limits together, all or nothing. It is safe for concurrent
// use.
type layeredStore struct {
	cluster sluice.Store
	local   *memory.Store
	global  sluice.Store // nil: the cluster's
}

// Take implements sluice.Store.
func (s *layeredStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	switch {
	case strings.HasPrefix(req.Key, localMark):
		return s.local.Take(ctx, req)
	case strings.HasPrefix(req.Key, globalMark):
		req.Key = req.Key[len(globalMark):]
		if s.global != nil {
			return s.global.Take(ctx, req)
		}
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
	e.layered = sluice.New(&layeredStore{cluster: e.store, local: local, global: e.cfg.GlobalStore})
	return nil
}

// checkKey is the store key of the i-th rule of limit l on key: a per-instance or global
// limit's key is marked for the layered store.
func checkKey(l *config.Limit, key string, i int) string {
	k := ruleKey(key, i)
	switch {
	case l != nil && l.IsLocal(i):
		return localMark + k
	case l != nil && l.IsGlobal(i):
		return globalMark + k
	}
	return k
}

// limiterFor is the limiter of a group of checks: the layered one when a check is a
// per-instance or global limit, else the store's own (which keeps the memory store's fast
// path).
func (e *Engine) limiterFor(checks []sluice.Check) *sluice.Limiter {
	for i := range checks {
		if k := checks[i].Key; strings.HasPrefix(k, localMark) || strings.HasPrefix(k, globalMark) {
			return e.layered
		}
	}
	return e.limiter
}
