package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/logthrottle"
)

// DefaultLogInterval is the least time between two lines of a Logger (see NewLogger).
const DefaultLogInterval = logthrottle.DefaultInterval

// Logger writes go-redis's own log lines (a pool that failed to dial, a Sentinel that
// switched primaries) to a *slog.Logger: each is a record at level Warn whose message is
// go-redis's line without its "redis: " prefix, with the attribute logger=go-redis. At most
// one line is written per interval (internal/logthrottle); the lines held back in between are
// counted in the next line's "suppressed" attribute, so an outage, when go-redis writes a line
// per failed dial, does not flood the log. A Logger is safe for concurrent use.
//
// go-redis has one logger per process, shared by every client; SetLogger installs one.
type Logger struct {
	log      *slog.Logger
	throttle logthrottle.Throttle
	now      func() time.Time
}

// NewLogger returns a Logger writing to l at most one line per interval (DefaultLogInterval
// when interval is 0; a negative interval writes every line).
func NewLogger(l *slog.Logger, interval time.Duration) *Logger {
	return &Logger{log: l, throttle: logthrottle.Throttle{Interval: interval}, now: time.Now}
}

// Printf implements go-redis's logging interface (redis.SetLogger).
func (l *Logger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimSpace(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
	l.throttle.Log(ctx, l.log, l.now(), slog.LevelWarn, msg, slog.String("logger", "go-redis"))
}

// SetLogger routes go-redis's own log lines, which it otherwise writes to standard error as
// plain text, through l (see Logger), at most one per interval (0: DefaultLogInterval). It
// replaces go-redis's logger for the whole process, every client included: a program calls
// it once at start (sluice serve does, with its own logger); the store never calls it for
// you.
func SetLogger(l *slog.Logger, interval time.Duration) {
	goredis.SetLogger(NewLogger(l, interval))
}
