package rlqs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/quota/alloc"
)

// countingObserver counts the state hooks (a hand-written Observer, not a mock).
type countingObserver struct {
	nopObserver
	errors, retries atomic.Int64
}

func (c *countingObserver) StateError() { c.errors.Add(1) }
func (c *countingObserver) StateRetry() { c.retries.Add(1) }

// TestRedisStateCountsRetries: a replica whose bucket another replica writes between the
// read and the write of its transaction retries, and the retry is reported to the Observer;
// the report still succeeds.
func TestRedisStateCountsRetries(t *testing.T) {
	rc := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { _ = rc.Close() })
	prefix := "test:rlqs-retry:" + time.Now().Format("150405.000000") + ":"
	obs := &countingObserver{}
	svc := New(Config{Rules: func() *config.Config { return loadRules(t) }, Ledger: NewRedisLedger(rc, prefix), Observer: obs})
	r := svc.ledger.(*redisLedger)
	ctx := context.Background()
	s := &alloc.Settings{Limit: 100, Period: time.Second}
	t.Cleanup(func() { rc.Del(ctx, r.hashKey("k")) })
	now := time.Now().UnixNano()
	other := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { _ = other.Close() })
	calls := 0
	err := r.update(ctx, "k", s, func(b *alloc.Bucket) []string {
		calls++
		if calls == 1 { // another replica writes the bucket meanwhile
			if err := other.HSet(ctx, r.hashKey("k"), "intruder", "x").Err(); err != nil {
				t.Fatal(err)
			}
		}
		b.Report(s, "me", now, 10, time.Second)
		return []string{"me"}
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || obs.retries.Load() != 1 || obs.errors.Load() != 0 {
		t.Fatalf("%d attempts, %d retries, %d errors; want 2, 1, 0", calls, obs.retries.Load(), obs.errors.Load())
	}
}
