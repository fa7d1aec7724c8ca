package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// DefaultLogInterval is the least time between two lines of a Logger (see NewLogger).
const DefaultLogInterval = time.Second

// Logger writes go-redis's own log lines (a pool that failed to dial, a Sentinel that
// switched primaries) to a *slog.Logger: each is a record at level Warn whose message is
// go-redis's line without its "redis: " prefix, with the attribute logger=go-redis. At most
// one line is written per interval; the lines dropped in between are counted in the next
// line's "dropped" attribute, so an outage, when go-redis writes a line per failed dial,
// does not flood the log. A Logger is safe for concurrent use.
//
// go-redis has one logger per process, shared by every client; SetLogger installs one.
type Logger struct {
	log      *slog.Logger
	interval int64 // ns
	last     atomic.Int64
	dropped  atomic.Int64
	now      func() time.Time
}

// NewLogger returns a Logger writing to l at most one line per interval (DefaultLogInterval
// when interval is 0; a negative interval writes every line).
func NewLogger(l *slog.Logger, interval time.Duration) *Logger {
	if interval == 0 {
		interval = DefaultLogInterval
	}
	return &Logger{log: l, interval: int64(interval), now: time.Now}
}

// Printf implements go-redis's logging interface (redis.SetLogger).
func (l *Logger) Printf(ctx context.Context, format string, v ...any) {
	now := l.now().UnixNano()
	last := l.last.Load()
	if l.interval > 0 && (now-last < l.interval || !l.last.CompareAndSwap(last, now)) {
		l.dropped.Add(1)
		return
	}
	msg := strings.TrimSpace(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
	attrs := []slog.Attr{slog.String("logger", "go-redis")}
	if n := l.dropped.Swap(0); n > 0 {
		attrs = append(attrs, slog.Int64("dropped", n))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	l.log.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// SetLogger routes go-redis's own log lines, which it otherwise writes to standard error as
// plain text, through l (see Logger), at most one per interval (0: DefaultLogInterval). It
// replaces go-redis's logger for the whole process, every client included: a program calls
// it once at start (sluice serve does, with its own logger); the store never calls it for
// you.
func SetLogger(l *slog.Logger, interval time.Duration) {
	goredis.SetLogger(NewLogger(l, interval))
}
