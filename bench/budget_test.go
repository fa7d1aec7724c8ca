package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/redis"
)

// Budgets (issue 33): a cost known after the work, as the two ways to account for it: today's
// take of the estimate then a settle of the difference (Limiter.AllowN + Limiter.Settle), and
// a reservation then its commit (Limiter.Reserve + Reservation.Commit), which also records the
// reservation (its id, TTL and what it holds) beside the state, so that an abandoned one
// expires and a commit can only end its own. Each op is one request: the estimate 800, the real
// cost 600, on one of 10k keys in turn under a token bucket of 10^9 per second (never refused),
// from one goroutine; cpu-ns/op is the process's CPU time per op (steadier than ns/op on a
// shared machine). Run the two interleaved, several times, and compare medians:
//
//	cd bench && for i in $(seq 8); do go test -run '^$' -bench 'Budget/memory' -benchmem; done | tee budget-memory.txt
//	cd bench && for i in $(seq 8); do SLUICE_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench 'Budget/redis' -benchmem; done | tee budget-redis.txt
func BenchmarkBudget(b *testing.B) {
	rule := sluice.TokenBucket(sluice.MaxLimit, time.Second, sluice.MaxLimit)
	budget := sluice.Budget{Rule: rule, Mode: sluice.Strict}
	const estimate, actual = 800, 600
	stores := []struct {
		name string
		open func(b *testing.B) sluice.Store
	}{
		{"memory", func(b *testing.B) sluice.Store {
			s, err := memory.New()
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"redis", func(b *testing.B) sluice.Store {
			c := redisClient(b)
			s, err := redis.New(c, redis.WithPrefix(fmt.Sprintf("bench:budget:%d:", time.Now().UnixNano())), redis.WithTimeout(5*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	}
	ctx := context.Background()
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			l := sluice.New(st.open(b))
			b.Run("take_settle", func(b *testing.B) {
				start := processCPU()
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					{
						k := keys[i%len(keys)]
						if _, err := l.AllowN(ctx, k, rule, estimate); err != nil {
							b.Error(err)
							return
						}
						if _, err := l.Settle(ctx, k, rule, actual-estimate); err != nil {
							b.Error(err)
							return
						}
					}
				}
				b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
			})
			b.Run("reserve_commit", func(b *testing.B) {
				start := processCPU()
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					{
						k := keys[i%len(keys)]
						r, err := l.Reserve(ctx, k, budget, estimate)
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := r.Commit(ctx, actual); err != nil {
							b.Error(err)
							return
						}
					}
				}
				b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
			})
		})
	}
}
