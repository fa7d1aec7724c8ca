package redis

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
)

// Test hooks, for package redis_test.

// WithoutDirectPath makes every decision go through a worker, so that concurrent decisions
// batch even when the store is idle.
func WithoutDirectPath() Option { return optionFunc(func(c *config) { c.noDirect = true }) }

// BatchedDecisions returns how many decisions s has made in batched script calls.
func BatchedDecisions(s *Store) int64 { return s.batched.Load() }

// TakeBatch decides n requests as one batch, in order, as a worker does with a queue of them;
// next(i) returns request i (and may move the store's clock first: each call reads it).
func TakeBatch(ctx context.Context, s *Store, n int, next func(i int) sluice.Request) ([]sluice.Decision, []error) {
	ds, errs := make([]sluice.Decision, n), make([]error, n)
	var batch, valid []*call
	for i := 0; i < n; i++ {
		req := next(i)
		if errs[i] = req.Validate(s.cfg.maxKeyLen); errs[i] != nil {
			batch = append(batch, nil)
			continue
		}
		c := s.newCall(ctx, &req, false)
		c.done = make(chan result, 1)
		batch, valid = append(batch, c), append(valid, c)
	}
	s.exec(valid, newBatcher(s.cfg.maxBatch))
	for i, c := range batch {
		if c != nil {
			select {
			case r := <-c.done:
				ds[i], errs[i] = r.d, r.err
			case <-c.ctx.Done():
				errs[i] = unavailable(c.ctx.Err())
			}
		}
	}
	return ds, errs
}

// Slot is slot.
func Slot(key string) uint16 { return slot(key) }

// Scripts returns the scripts of the algorithms, for checks of their assembly.
func Scripts() []*script {
	return []*script{fixedWindowScript, slidingLogScript, slidingWindowScript, bucketScript, gcraScript}
}

// ScriptInfo returns a script's name and source and its batched variant's source ("" if none).
func ScriptInfo(sc *script) (name, src, multi string) {
	if sc.multi != nil {
		multi = sc.multi.src
	}
	return sc.name, sc.src, multi
}

// SetLoggerClock makes l read the time from now.
func SetLoggerClock(l *Logger, now func() time.Time) { l.now = now }

// LeaseScripts returns the sources of the lease scripts, for tests that load them first.
func LeaseScripts() []string {
	return []string{leaseAcquireLua, leaseRenewLua, leaseReleaseLua, leaseClearLua}
}

// Leaders returns how many pipelines s has under way or about to be.
func Leaders(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaders
}

// SetServerOffset sets the store's estimate of the server's clock minus the client's (counters,
// WithCounters), so that a test can make it wrong.
func SetServerOffset(s *Store, d time.Duration) { s.offset.ns.Store(int64(d)) }
