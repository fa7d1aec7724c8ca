// Package logthrottle is the one log throttle of Sluice: a line of one kind goes out at most
// once per interval, and the lines held back in between are counted in the next line's
// "suppressed" attribute, so that a flood of bad requests or a store outage does not flood the
// log and an operator greps every package's lines the same way.
package logthrottle

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// DefaultInterval is the least time between two lines of one Throttle when its Interval is 0.
const DefaultInterval = time.Second

// SuppressedKey is the attribute that counts the lines held back since the last one written.
const SuppressedKey = "suppressed"

// Throttle lets one line through per Interval. The zero value is ready to use with
// DefaultInterval; a negative Interval lets every line through. A Throttle is safe for
// concurrent use; it holds no clock: callers pass the instant, so tests need no sleep.
type Throttle struct {
	// Interval is the least time between two lines (0: DefaultInterval; negative: none).
	Interval time.Duration

	last       atomic.Int64 // Unix ns of the last line let through; 0 before the first
	suppressed atomic.Int64
}

// Allow reports whether a line may be written at now, and if so how many lines were held back
// since the last one; a caller that gets false writes nothing (the line is counted).
func (t *Throttle) Allow(now time.Time) (suppressed int64, ok bool) {
	interval := t.Interval
	if interval == 0 {
		interval = DefaultInterval
	}
	if interval > 0 {
		n := now.UnixNano()
		last := t.last.Load()
		if last != 0 && n-last < int64(interval) || !t.last.CompareAndSwap(last, n) {
			t.suppressed.Add(1)
			return 0, false
		}
	}
	return t.suppressed.Swap(0), true
}

// Log writes msg at level with attrs to l unless a line was let through less than Interval
// before now; the line carries SuppressedKey when lines were held back since the last one.
func (t *Throttle) Log(ctx context.Context, l *slog.Logger, now time.Time, level slog.Level, msg string, attrs ...slog.Attr) {
	n, ok := t.Allow(now)
	if !ok || l == nil {
		return
	}
	if n > 0 {
		attrs = append(attrs, slog.Int64(SuppressedKey, n))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}
