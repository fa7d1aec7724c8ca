package rls

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Ready probes the store (at most once a second; a write, so a store that answers reads but
// refuses writes is not ready) and returns why decisions are the fallback's while a fallback
// decides because the store is unavailable ("" otherwise; its own probes run then, so the
// store is not probed). An error means the store fails without a fallback answering, or
// no rules are in force yet (ErrNoRules; see Config.ReadyWithoutRules).
func (e *Engine) Ready(ctx context.Context) (degraded string, err error) {
	if !e.RulesReady() {
		return "", ErrNoRules
	}
	if e.fallback == nil || e.fallback.degraded() == "" {
		if err := e.readyCheck.check(ctx); err != nil {
			return "", err
		}
	}
	if e.fallback != nil {
		return e.fallback.degraded(), nil
	}
	return "", nil
}

// readiness probes the store at most once a second.
type readiness struct {
	store   sluice.Store
	clock   sluice.Clock
	checked atomic.Int64
	ok      atomic.Bool
}

// readyRule is the rule of the readiness probe: a write that always admits, on a key that
// lives a second.
var readyRule = sluice.FixedWindow(sluice.MaxLimit, time.Second)

// check takes one unit of the readiness key, so a store that answers reads but refuses
// writes (Redis out of memory, a read-only replica) is not ready; a success is trusted for a
// second.
func (rc *readiness) check(ctx context.Context) error {
	now := rc.clock.Now().UnixNano()
	if now-rc.checked.Load() < int64(time.Second) {
		if rc.ok.Load() {
			return nil
		}
	}
	err := rc.probe(ctx)
	rc.ok.Store(err == nil)
	rc.checked.Store(now)
	return err
}

// probe takes one unit of the readiness key now, whatever the last check found.
func (rc *readiness) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := rc.store.Take(ctx, sluice.Request{Key: "sluice|readyz", Rule: readyRule, N: 1})
	return err
}

// ProbeStore probes the store now, with the write Ready makes, whatever the rules and without
// touching what Ready remembers: the server holds itself not ready until the store has
// answered once. With a fallback the probe goes through it, which answers for the store.
func (e *Engine) ProbeStore(ctx context.Context) error { return e.readyCheck.probe(ctx) }
