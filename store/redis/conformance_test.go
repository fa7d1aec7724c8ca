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

// TestConformanceCounters runs the suite on the windows kept in counters and decided without
// Lua (WithCounters; the other algorithms keep their scripts), on one Redis and on a Cluster.
func TestConformanceCounters(t *testing.T) {
	for name, c := range map[string]func(testing.TB) goredis.UniversalClient{"standalone": standalone, "cluster": clusterClient} {
		t.Run(name, func(t *testing.T) {
			client := c(t)
			storetest.RunSkipping(t, func(t *testing.T, clock sluice.Clock) sluice.Store {
				return newStore(t, client, redis.WithClock(clock), redis.WithCounters())
			}, countersSkip)
		})
	}
}

// countersSkip skips the step tables whose clock goes back for the windows kept in counters:
// they count in the earlier window's counter, where the scripts and package algorithm stay
// in the newest window (a deliberate difference, plain.go; TestCountersClockBack states it).
func countersSkip(c storetest.Case) string {
	if storetest.ClockGoesBack(c) && (c.Rule.Algorithm == sluice.AlgorithmFixedWindow || c.Rule.Algorithm == sluice.AlgorithmSlidingWindow) {
		return "counters: a clock that goes back counts in the earlier window (plain.go)"
	}
	return ""
}
