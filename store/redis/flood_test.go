package redis_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/redis"
)

// TestKeyFlood (issue 16, item 8): 50k unique keys (1M under SLUICE_CHAOS) decided on Redis
// from 16 goroutines: every key has a TTL, and once the period is over the keys of the test's
// prefix are gone (under 1% left a second after it), so a flood cannot fill Redis.
func TestKeyFlood(t *testing.T) {
	flood := int64(50_000)
	if testenv.Chaos() {
		flood = 1_000_000
	}
	c := standalone(t)
	prefix := testPrefix(t, c)
	s := newStore(t, c, redis.WithPrefix(prefix))
	rule := sluice.FixedWindow(10, 2*time.Second)
	ctx := context.Background()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= flood; i = next.Add(1) {
				if _, err := s.Take(ctx, sluice.Request{Key: "flood:" + strconv.FormatInt(i, 10), Rule: rule, N: 1}); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d decisions failed", n, flood)
	}
	held := countKeys(t, c, prefix)
	checkTTLs(t, c, prefix, false)
	deadline := start.Add(took + rule.Period + time.Second)
	time.Sleep(time.Until(deadline))
	left := countKeys(t, c, prefix)
	t.Logf("%d unique keys in %v (%.0f/s): %d keys held, every one with a TTL; %d left %v after the last decision (period %v)",
		flood, took.Round(time.Millisecond), float64(flood)/took.Seconds(), held, left, rule.Period+time.Second, rule.Period)
	if held == 0 {
		t.Fatal("no key written")
	}
	if left > flood/100 {
		t.Errorf("%d keys of %d still in Redis a second after their period", left, flood)
	}
}

// countKeys counts the keys under prefix on a standalone server (SCAN skips expired keys).
func countKeys(t *testing.T, c goredis.UniversalClient, prefix string) int64 {
	t.Helper()
	ctx := context.Background()
	var n int64
	iter := c.Scan(ctx, 0, prefix+"*", 10_000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
