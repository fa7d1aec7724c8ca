package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/redis"
)

// t0 is the first instant of clock-driven tests: a whole second, like the storetest tables.
var t0 = time.Unix(1_700_000_000, 0)

// standalone returns a client of the standalone server from scripts/test.sh.
func standalone(t testing.TB) goredis.UniversalClient {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testPrefix returns a key prefix of the test's own, and removes its keys at the end.
func testPrefix(t testing.TB, c goredis.UniversalClient) string {
	t.Helper()
	p := fmt.Sprintf("sluicetest:%s:%x:", strings.ReplaceAll(t.Name(), "/", "."), rand.Uint64())
	t.Cleanup(func() { checkTTLs(t, c, p, true) })
	return p
}

// checkTTLs fails the test when a key under prefix has no TTL, and deletes them if asked.
func checkTTLs(t testing.TB, c goredis.UniversalClient, prefix string, del bool) {
	t.Helper()
	ctx := context.Background()
	scan := func(ctx context.Context, c *goredis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			ttl, err := c.PTTL(ctx, k).Result()
			if err != nil {
				return err
			}
			if ttl < 0 && ttl != -2*time.Nanosecond {
				t.Errorf("key %q has no TTL (PTTL %v)", k, ttl)
			}
			if del {
				c.Del(ctx, k)
			}
		}
		return iter.Err()
	}
	var err error
	switch cc := c.(type) {
	case *goredis.ClusterClient:
		err = cc.ForEachMaster(ctx, scan)
	case *goredis.Client:
		err = scan(ctx, cc)
	}
	if err != nil {
		t.Errorf("scanning %s*: %v", prefix, err)
	}
}

// testTimeout bounds every call of the correctness tests: generous, so that a loaded CI box
// (-race, 2 cores, packages in parallel) never turns a slow call into a failure. Only the
// tests about timeouts use short ones.
const testTimeout = 5 * time.Second

// newStore returns a store on c with a prefix of the test's own and testTimeout; opts come
// after, so they may override both.
func newStore(t testing.TB, c goredis.UniversalClient, opts ...redis.Option) *redis.Store {
	t.Helper()
	opts = append([]redis.Option{redis.WithPrefix(testPrefix(t, c)), redis.WithTimeout(testTimeout)}, opts...)
	s, err := redis.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
