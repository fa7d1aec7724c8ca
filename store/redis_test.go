package store_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redis"
)

// These tests use the Redis servers scripts/test.sh starts (testenv): standalone, Sentinel
// and Cluster.

func freshPrefix() string {
	return "sluice-store-test:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
}

// redisURLs returns the URL of every Redis topology of the test environment.
func redisURLs(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"redis": func(t *testing.T) string { return "redis://" + testenv.RedisAddr(t) + "/0" },
		"redis-sentinel": func(t *testing.T) string {
			addrs, master := testenv.Sentinel(t)
			return "redis-sentinel://" + strings.Join(addrs, ",") + "/" + master
		},
		"redis-cluster": func(t *testing.T) string {
			return "redis-cluster://" + strings.Join(testenv.List(t, "SLUICE_REDIS_CLUSTER_ADDRS"), ",")
		},
	}
}

// TestOpenRedis: every Redis scheme, in every mode with and without fallback, answers the
// Ping and holds one limit on a real server, under Config.Prefix.
func TestOpenRedis(t *testing.T) {
	ctx := context.Background()
	for scheme, url := range redisURLs(t) {
		t.Run(scheme, func(t *testing.T) {
			u := url(t)
			for _, mode := range modes {
				for _, fb := range []string{"", "local"} {
					name := fmt.Sprintf("mode %q fallback %q", mode, fb)
					prefix := freshPrefix()
					st, closer, err := store.Open(ctx, store.Config{Backend: store.Backend{URL: u, Prefix: prefix, Timeout: 5 * time.Second, Ping: true}, Decorators: store.Decorators{Mode: mode, Fallback: fb}})
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					lim := sluice.New(st)
					allowed := 0
					for range 5 {
						d, err := lim.Allow(ctx, "k", sluice.GCRA(3, time.Minute, 0))
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if d.Allowed {
							allowed++
						}
					}
					if allowed != 3 {
						t.Errorf("%s: admitted %d, want the limit 3", name, allowed)
					}
					if err := closer.Close(); err != nil {
						t.Errorf("%s: Close: %v", name, err)
					}
					if n := keysUnder(t, u, prefix); n != 1 {
						t.Errorf("%s: %d keys under the prefix %q, want 1", name, n, prefix)
					}
				}
			}
		})
	}
}

// windowCount sums the window counters (sluice.WindowCounter) under prefix.
func windowCount(t *testing.T, url, prefix string) int64 {
	t.Helper()
	st, err := redis.NewFromURL(url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	keys, err := st.Client().Keys(ctx, prefix+"*:w:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, k := range keys {
		n, err := st.Client().Get(ctx, k).Int64()
		if err != nil {
			t.Fatal(err)
		}
		sum += n
	}
	return sum
}

// keysUnder counts the keys of the decision above under prefix, through a store of its own.
func keysUnder(t *testing.T, url, prefix string) int64 {
	t.Helper()
	st, err := redis.NewFromURL(url, redis.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.Client().Exists(context.Background(), st.Key("k")).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpenRedisClock: on Redis, Config.Clock is the time the scripts decide on.
func TestOpenRedisClock(t *testing.T) {
	ctx := context.Background()
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	st, closer, err := store.Open(ctx, store.Config{Backend: store.Backend{URL: "redis://" + testenv.RedisAddr(t), Clock: clock, Prefix: freshPrefix()}, Decorators: store.Decorators{Mode: "overlimit"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	lim := sluice.New(st)
	rule := sluice.FixedWindow(2, time.Hour)
	for step, want := range []bool{true, true, false, true} {
		if step == 3 {
			clock.Advance(time.Hour)
		}
		if d, err := lim.Allow(ctx, "k", rule); err != nil || d.Allowed != want {
			t.Fatalf("step %d: %+v, %v; want allowed %v", step, d, err, want)
		}
	}
}

// TestCloseFlushesAsyncBeforeTheClient: Close pushes the counts the async decorator holds
// (no background sync has run: its clock stands still) into Redis, then closes the client;
// closing the client first would lose them and fail.
func TestCloseFlushesAsyncBeforeTheClient(t *testing.T) {
	ctx := context.Background()
	url := "redis://" + testenv.RedisAddr(t)
	rule := sluice.FixedWindow(10, time.Hour)
	for _, fb := range []string{"", "local", "fail_closed"} {
		clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		cfg := store.Config{Backend: store.Backend{URL: url, Clock: clock, Prefix: freshPrefix()}, Decorators: store.Decorators{Mode: "async", Fallback: fb}}
		st, closer, err := store.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sluice.New(st).AllowN(ctx, "k", rule, 4); err != nil {
			t.Fatal(err)
		}
		if err := closer.Close(); err != nil {
			t.Errorf("fallback %q: Close: %v", fb, err)
		}
		if n := windowCount(t, url, cfg.Prefix); n != 4 {
			t.Errorf("fallback %q: after Close, Redis counts %d in the key's windows, want 4", fb, n)
		}
	}
}
