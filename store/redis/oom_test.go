package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/redis"
)

// TestOutOfMemory fills a dedicated redis-server up to its maxmemory (noeviction) and wants
// every decision, on the direct path, through pipelines and in batched script calls, to fail
// with an error wrapping
// ErrStoreUnavailable, never to be allowed; once memory is freed, decisions resume.
func TestOutOfMemory(t *testing.T) {
	srv := testenv.StartRedis(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	addr := srv.Addr()
	ctx := context.Background()
	admin := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer admin.Close()
	srv.FillUntilOOM(t)
	for _, direct := range []bool{true, false} {
		// ContextTimeoutEnabled lets an idle store's callers send their own call; without it
		// every call goes through the pipeline workers.
		c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: direct})
		s, err := redis.New(c, redis.WithTimeout(testTimeout))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range sluice.Algorithms() {
			rule := sluice.Rule{Algorithm: a, Limit: 10, Period: time.Second}
			for i := 0; i < 3; i++ {
				d, err := s.Take(ctx, sluice.Request{Key: "oom-" + strconv.Itoa(i), Rule: rule, N: 1})
				if d.Allowed || !errors.Is(err, sluice.ErrStoreUnavailable) || !strings.Contains(err.Error(), "OOM") {
					t.Errorf("%s (direct %v) under OOM: %+v, %v; want an OOM error wrapping ErrStoreUnavailable", a, direct, d, err)
				}
			}
		}
		// A batched script call fails as a whole: every decision in it is an error.
		for _, a := range sluice.Algorithms() {
			rule := sluice.Rule{Algorithm: a, Limit: 10, Period: time.Second}
			ds, errs := redis.TakeBatch(ctx, s, 4, func(i int) sluice.Request {
				return sluice.Request{Key: "oom-batch-" + strconv.Itoa(i%2), Rule: rule, N: 1}
			})
			for i, d := range ds {
				if d.Allowed || !errors.Is(errs[i], sluice.ErrStoreUnavailable) || !strings.Contains(errs[i].Error(), "OOM") {
					t.Errorf("%s batched call %d under OOM: %+v, %v; want an OOM error wrapping ErrStoreUnavailable", a, i, d, errs[i])
				}
			}
		}
		_ = s.Close()
		_ = c.Close()
	}
	// SYNC: Valkey (lazyfree-lazy-user-flush yes by default) frees a plain FLUSHALL's memory
	// in the background, after the reply.
	if err := admin.Do(ctx, "flushall", "sync").Err(); err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	s, err := redis.New(c, redis.WithTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := s.Take(ctx, sluice.Request{Key: "after", Rule: sluice.GCRA(10, time.Second, 0), N: 1})
	if err != nil || !d.Allowed {
		t.Fatalf("after freeing memory: %+v, %v; want allowed", d, err)
	}
}
