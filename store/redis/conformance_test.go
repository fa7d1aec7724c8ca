package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/redis"
	"github.com/sluicehq/sluice/store/storetest"
)

// conformance runs the storetest suite on client, then checks every key it wrote has a TTL.
func conformance(t *testing.T, c goredis.UniversalClient) {
	newWithClock := func(t *testing.T, clock sluice.Clock) sluice.Store {
		return newStore(t, c, redis.WithClock(clock))
	}
	storetest.Run(t, newWithClock)
	t.Run("Leases", func(t *testing.T) { storetest.RunLeases(t, newWithClock) })
}

func TestConformanceStandalone(t *testing.T) { conformance(t, standalone(t)) }
