package redis_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/redis"
)

// admitExactly has 64 goroutines send 5 x limit requests on one key through limiters, and
// wants exactly limit admitted for each algorithm.
func admitExactly(t *testing.T, limiters []*sluice.Limiter) {
	const limit, goroutines = 200, 64
	algs := []sluice.Algorithm{sluice.AlgorithmSlidingLog, sluice.AlgorithmFixedWindow,
		sluice.AlgorithmTokenBucket, sluice.AlgorithmGCRA}
	for _, a := range algs {
		rule := sluice.Rule{Algorithm: a, Limit: limit, Period: time.Hour}
		var admitted, failed atomic.Int64
		var wg sync.WaitGroup
		work := make(chan struct{}, 5*limit)
		for i := 0; i < 5*limit; i++ {
			work <- struct{}{}
		}
		close(work)
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func(l *sluice.Limiter) {
				defer wg.Done()
				for range work {
					d, err := l.Allow(context.Background(), "one-key", rule)
					switch {
					case err != nil:
						failed.Add(1)
					case d.Allowed:
						admitted.Add(1)
					}
				}
			}(limiters[g%len(limiters)])
		}
		wg.Wait()
		if failed.Load() != 0 || admitted.Load() != limit {
			t.Errorf("%s: %d goroutines x %d requests on %d limiter(s): admitted %d (want %d), %d errors",
				a, goroutines, 5*limit, len(limiters), admitted.Load(), limit, failed.Load())
		}
	}
}

func concurrency(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
	// The clock stands still, so nothing refills while the goroutines race.
	clock := sluicetest.NewManualClock(t0)
	t.Run("OneLimiter", func(t *testing.T) {
		admitExactly(t, []*sluice.Limiter{sluice.New(newStore(t, newClient(t), redis.WithClock(clock)))})
	})
	t.Run("TwoInstances", func(t *testing.T) {
		// Two stores on two clients (two "instances") sharing one Redis share one limit.
		c1, c2 := newClient(t), newClient(t)
		s1 := newStore(t, c1, redis.WithClock(clock))
		s2, err := redis.New(c2, redis.WithClock(clock), redis.WithPrefix(prefixOf(s1)), redis.WithTimeout(testTimeout))
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		admitExactly(t, []*sluice.Limiter{sluice.New(s1), sluice.New(s2)})
	})
}

// prefixOf recovers a store's key prefix from the Redis key of "x".
func prefixOf(s *redis.Store) string { k := s.Key("x"); return k[:len(k)-3] }

func TestConcurrencyStandalone(t *testing.T) { concurrency(t, standalone) }
func TestConcurrencySentinel(t *testing.T)   { concurrency(t, sentinelClient) }
func TestConcurrencyCluster(t *testing.T)    { concurrency(t, clusterClient) }

// TestServerClock: without WithClock the scripts read Redis TIME and still decide exactly.
func TestServerClock(t *testing.T) {
	s := newStore(t, standalone(t))
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		rule := sluice.Rule{Algorithm: a, Limit: 3, Period: time.Hour}
		for i := 0; i < 4; i++ {
			d, err := s.Take(ctx, sluice.Request{Key: "server-clock", Rule: rule, N: 1})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != (i < 3) || d.Capacity != 3 {
				t.Fatalf("%s take %d: %+v", a, i, d)
			}
			// A sliding window waits for the weight of the previous window to fall: up to
			// two periods, depending on where in the hour the server clock is.
			if !d.Allowed && (d.RetryAfter <= 0 || d.RetryAfter > 2*time.Hour) {
				t.Fatalf("%s: RetryAfter %v out of (0, 2h]", a, d.RetryAfter)
			}
		}
	}
}
