package redis_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/redis"
)

// deadClient returns a client of a 127.0.0.1 port nothing listens on: every command fails to
// dial, once, and go-redis logs it.
func deadClient(t *testing.T) *goredis.Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, PoolSize: 100})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestLoggerRoutesGoRedisLines: go-redis's lines about a failed dial reach the slog logger as
// WARN records (logger=go-redis), one per interval, the next one counting those suppressed.
func TestLoggerRoutesGoRedisLines(t *testing.T) {
	t.Cleanup(logging.Enable) // go-redis's own logger again
	var buf testenv.LogBuffer
	var now atomic.Int64
	now.Store(t0.UnixNano())
	l := redis.NewLogger(slog.New(slog.NewJSONHandler(&buf, nil)), time.Second)
	redis.SetLoggerClock(l, func() time.Time { return time.Unix(0, now.Load()) })
	goredis.SetLogger(l)
	c := deadClient(t)
	ctx := context.Background()
	for range 3 {
		if err := c.Ping(ctx).Err(); err == nil {
			t.Fatal("a ping of a dead port answered")
		}
	}
	recs := buf.Records(t, "")
	if len(recs) != 1 {
		t.Fatalf("3 failed dials within a second: %d records %v, want 1", len(recs), recs)
	}
	if msg, _ := recs[0]["msg"].(string); recs[0]["logger"] != "go-redis" || recs[0]["level"] != "WARN" ||
		!strings.Contains(msg, "failed to dial") || strings.HasPrefix(msg, "redis: ") {
		t.Errorf("record %v: want level WARN, logger go-redis, go-redis's line without its prefix", recs[0])
	}
	now.Add(int64(time.Second))
	_ = c.Ping(ctx).Err()
	recs = buf.Records(t, "")
	if len(recs) != 2 || recs[1]["suppressed"] != float64(2) {
		t.Fatalf("a second later: records %v, want a second one with suppressed=2", recs)
	}

	var every testenv.LogBuffer // SetLogger with a negative interval: every line
	redis.SetLogger(slog.New(slog.NewJSONHandler(&every, nil)), -1)
	for range 2 {
		_ = c.Ping(ctx).Err()
	}
	if recs := every.Records(t, ""); len(recs) != 2 {
		t.Fatalf("SetLogger(l, -1): %d records %v for 2 failed dials, want 2", len(recs), recs)
	}
}
