package rlqs_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/quota/rlqs"
)

// TestTwoReplicasShareOneBudget: ten skewed clients, half on each of two replicas over one
// Redis, get their max-min fair shares of one limit after two rounds, and at no time hold
// more than the limit together.
func TestTwoReplicasShareOneBudget(t *testing.T) {
	addr := testenv.RedisAddr(t)
	rc := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rc.Close() })
	prefix := "test:rlqs:" + time.Now().Format("150405.000000") + ":"
	t.Cleanup(func() {
		keys, _ := rc.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rc.Del(context.Background(), keys...)
		}
	})
	clock := newClock()
	newReplica := func() *rlqs.Service {
		return rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, fairRules) }, Clock: clock, State: rlqs.NewRedisState(rc, prefix)})
	}
	a, b := newReplica(), newReplica()
	connA, connB := serve(t, a), serve(t, b)
	f := &fleet{t: t, demands: skewed, shares: make([]int64, len(skewed)), ttls: make([]time.Duration, len(skewed))}
	for i := range skewed {
		conn := connA
		if i%2 == 1 {
			conn = connB
		}
		f.clients = append(f.clients, newFakeEnvoy(t, conn, "envoy"))
	}
	want := maxMin(1000, skewed)
	f.round()
	clock.Advance(interval)
	f.round()
	if !within5(f.shares, want) {
		t.Fatalf("after two rounds over two replicas: shares %v, max-min fair %v", f.shares, want)
	}
	var sum int64
	for _, s := range f.shares {
		sum += s
	}
	if sum > 1000 {
		t.Fatalf("replicas handed out %d > 1000", sum)
	}
	keys, err := rc.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v %v, want one bucket hash", keys, err)
	}
	if ttl := rc.PTTL(context.Background(), keys[0]).Val(); ttl <= 0 {
		t.Fatalf("bucket hash without TTL (%v)", ttl)
	}
}
