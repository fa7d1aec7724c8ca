package grpclimit

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Stats counts an Interceptor's decisions since it was built.
type Stats struct {
	// Allowed and Denied count the calls the limits admitted and refused.
	Allowed, Denied uint64
	// StoreErrors counts the calls the store could not decide, which the failure policy
	// then ran (fail open) or refused (fail closed).
	StoreErrors uint64
	// Invalid counts defects: a key the store refused (codes.InvalidArgument), a key function
	// that panicked (codes.Internal), a cost function that panicked or returned less than 1
	// (the call cost 1).
	Invalid uint64
}

type counters struct {
	allowed, denied, storeErrors, invalid atomic.Uint64
}

// Stats returns the interceptor's counts. It is safe for concurrent use.
func (in *Interceptor) Stats() Stats {
	return Stats{Allowed: in.count.allowed.Load(), Denied: in.count.denied.Load(),
		StoreErrors: in.count.storeErrors.Load(), Invalid: in.count.invalid.Load()}
}

// logEvery is the least time between two log lines of one kind.
const logEvery = time.Second

// logThrottle writes one kind of line at most once per logEvery; the lines dropped in between
// are counted in the next line's "dropped" attribute.
type logThrottle struct {
	last    atomic.Int64 // UnixNano of the last line written
	dropped atomic.Int64
}

// log writes msg with attrs at level Error unless a line of this kind was written less than
// logEvery ago.
func (t *logThrottle) log(l *slog.Logger, clock sluice.Clock, msg string, attrs ...slog.Attr) {
	now := clock.Now().UnixNano()
	last := t.last.Load()
	if last != 0 && now-last < int64(logEvery) || !t.last.CompareAndSwap(last, now) {
		t.dropped.Add(1)
		return
	}
	if n := t.dropped.Swap(0); n > 0 {
		attrs = append(attrs, slog.Int64("dropped", n))
	}
	l.LogAttrs(context.Background(), slog.LevelError, msg, attrs...)
}
