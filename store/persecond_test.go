package store_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// TestOpenPerSecond: with a PerSecondURL, the rules of a one-second period are decided on
// that store and the others on URL's (envoyproxy/ratelimit's REDIS_PERSECOND): here two
// databases of one Redis, so a key spent under a one-second rule is still fresh under a
// minute rule, and its state is in the per-second database alone.
func TestOpenPerSecond(t *testing.T) {
	addr := testenv.RedisAddr(t)
	prefix := freshPrefix()
	st, closer, err := store.Open(context.Background(), store.Config{Backend: store.Backend{URL: "redis://" + addr + "/0", PerSecondURL: "redis://" + addr + "/1", Prefix: prefix}})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	ctx := context.Background()
	take := func(period time.Duration) bool {
		d, err := st.Take(ctx, sluice.Request{Key: "k", N: 1, Rule: sluice.Rule{Algorithm: sluice.AlgorithmFixedWindow, Limit: 1, Period: period}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	if !take(time.Second) || take(time.Second) {
		t.Fatal("one-second rule of 1: want allowed, then denied")
	}
	if !take(time.Minute) {
		t.Error("minute rule on the same key: denied, so it was decided on the per-second store")
	}
	for db, want := range map[int]bool{0: true, 1: true} {
		c := goredis.NewClient(&goredis.Options{Addr: addr, DB: db})
		keys, err := c.Keys(ctx, prefix+"*").Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if (len(keys) == 1) != want {
			t.Errorf("db %d: keys %q, want one", db, keys)
		}
	}
	if _, _, err := store.Open(ctx, store.Config{Backend: store.Backend{URL: "memory", PerSecondURL: "nosuch://x"}}); err == nil {
		t.Error("a per-second URL of no store: no error")
	}
}
