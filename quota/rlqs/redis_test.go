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
	newFleetOver(t, serve(t, a), serve(t, b)).twoRounds(clock)
	keys, err := rc.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v %v, want one bucket hash", keys, err)
	}
	if ttl := rc.PTTL(context.Background(), keys[0]).Val(); ttl <= 0 {
		t.Fatalf("bucket hash without TTL (%v)", ttl)
	}
}
