package memcached_test

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memcached"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestConformance(t *testing.T) {
	addr := server(t)
	newWithClock := func(t *testing.T, clock sluice.Clock) sluice.Store {
		return newStore(t, []string{addr}, memcached.WithClock(clock))
	}
	storetest.Run(t, newWithClock)
	t.Run("Leases", func(t *testing.T) { storetest.RunLeases(t, newWithClock) })
}
