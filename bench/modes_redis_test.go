package bench

import (
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/store/redis"
)

// BenchmarkModesRedis is BenchmarkModesMemory on the Redis at SLUICE_REDIS_ADDR (skipped when
// unset): sync mode pays a round trip per decision; async and the over-limit cache do not.
func BenchmarkModesRedis(b *testing.B) {
	addr := os.Getenv("SLUICE_REDIS_ADDR")
	if addr == "" {
		b.Skip("SLUICE_REDIS_ADDR is not set")
	}
	newStore := func(b *testing.B) *redis.Store {
		client := goredis.NewClient(&goredis.Options{Addr: addr})
		s, err := redis.New(client, redis.WithPrefix("bench:"+b.Name()+":"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close(); client.Close() })
		return s
	}
	b.Run("sync/allow", func(b *testing.B) { benchDecide(b, newStore(b), modeRule, 1000) })
	b.Run("sync/denied", func(b *testing.B) { benchDecide(b, newStore(b), deniedRule, 1000) })
	b.Run("async/allow", func(b *testing.B) {
		a, err := distributed.NewAsync(newStore(b), distributed.WithInterval(100*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		defer a.Close()
		benchDecide(b, a, modeRule, 1000)
	})
	b.Run("overlimit/denied", func(b *testing.B) {
		o, err := distributed.NewOverLimit(newStore(b))
		if err != nil {
			b.Fatal(err)
		}
		benchDecide(b, o, deniedRule, 1000)
	})
}
