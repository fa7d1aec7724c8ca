package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcached"
)

// TestOpenMemcached: memcached:// answers the Ping and holds one limit, under Config.Prefix
// and Config.Clock, with and without the fallback; a server that does not answer fails the
// Ping with ErrStoreUnavailable.
func TestOpenMemcached(t *testing.T) {
	url := "memcached://" + testenv.MemcachedAddr(t)
	for _, fallback := range []string{"", "local"} {
		clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		st, closer, err := store.Open(context.Background(), store.Config{Backend: store.Backend{URL: url, Ping: true, Prefix: freshPrefix(), Clock: clock, Timeout: time.Second}, Decorators: store.Decorators{Fallback: fallback}})
		if err != nil {
			t.Fatal(err)
		}
		if fallback == "" {
			if _, ok := st.(*memcached.Store); !ok {
				t.Errorf("opened %T, want *memcached.Store", st)
			}
		}
		lim := sluice.New(st)
		rule := sluice.GCRA(3, time.Minute, 0)
		for i := range 4 {
			d, err := lim.Allow(context.Background(), "k", rule)
			if err != nil || d.Allowed != (i < 3) {
				t.Errorf("fallback %q take %d: %+v, %v", fallback, i, d, err)
			}
		}
		if err := closer.Close(); err != nil {
			t.Error(err)
		}
	}
	_, _, err := store.Open(context.Background(), store.Config{Backend: store.Backend{URL: "memcached://127.0.0.1:1", Ping: true}})
	if !errors.Is(err, sluice.ErrStoreUnavailable) {
		t.Errorf("ping of a closed port: %v, want ErrStoreUnavailable", err)
	}
}
