package memcached_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/memcached"
)

// t0 is the instant tests start their manual clocks at.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// server returns the shared memcached's address (SLUICE_MEMCACHED_ADDR).
func server(t testing.TB) string { t.Helper(); return testenv.MemcachedAddr(t) }

// newStore returns a store on addrs with a prefix unique to the test, closed at cleanup. Its
// timeout is 5 s unless opts set one: tests that are not about time must not fail because a
// loaded machine (the race detector, other jobs) made a round trip slow.
func newStore(t testing.TB, addrs []string, opts ...memcached.Option) *memcached.Store {
	t.Helper()
	opts = append([]memcached.Option{memcached.WithPrefix(prefix()), memcached.WithTimeout(5 * time.Second)}, opts...)
	s, err := memcached.NewFromServers(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// prefix returns a key prefix no earlier run used, so tests on the shared server never see
// each other's items, always prefixLen bytes long (whether a user key is sent raw depends on
// the prefix's length: a CI run drew a shorter one and a key of 200 bytes fit).
func prefix() string { return fmt.Sprintf("t%016x:", rand.Uint64()) }

const prefixLen = 18
