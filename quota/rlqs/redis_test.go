package rlqs_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestTwoReplicasShareOneBudget: ten skewed clients, half on each of two replicas over one
// Redis, get their max-min fair shares of one limit after two rounds, and at no time hold
// more than the limit together.
func TestTwoReplicasShareOneBudget(t *testing.T) {
	clock := newClock()
	rc, prefix, newReplica := replicas(t, clock, fairRules)
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

// replicas returns a client of the test Redis, a key prefix of the test's own (its keys
// deleted at the end), and a function building a replica over body sharing them.
func replicas(t *testing.T, clock *sluicetest.ManualClock, body string) (*redis.Client, string, func() *rlqs.Service) {
	rc := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { _ = rc.Close() })
	prefix := "test:rlqs:" + t.Name() + ":" + time.Now().Format("150405.000000") + ":"
	t.Cleanup(func() {
		keys, _ := rc.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rc.Del(context.Background(), keys...)
		}
	})
	return rc, prefix, func() *rlqs.Service {
		return rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, body) }, Clock: clock, Ledger: rlqs.NewRedisLedger(rc, prefix)})
	}
}

// TestRedisDownKeepsStreams: while the shared Redis is down, buckets that need it get no
// answer (their clients keep their assignments until they expire), the stream stays open
// and blanket buckets are still answered; once Redis is back, shares are handed out again.
func TestRedisDownKeepsStreams(t *testing.T) {
	srv := testenv.StartRedis(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	clock := newClock()
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, fairRules) }, Clock: clock, Ledger: rlqs.NewRedisLedger(rc, "")})
	c := newFakeEnvoy(t, serve(t, svc), "envoy")
	open := map[string]string{"name": "open"}
	if r := c.report(usage(api, interval, 10, 0), usage(open, interval, 1, 0)); len(r.BucketAction) != 2 {
		t.Fatalf("with Redis: %v", r)
	}
	srv.Kill()
	clock.Advance(interval)
	r := c.report(usage(api, interval, 10, 0), usage(open, interval, 1, 0))
	if len(r.BucketAction) != 1 || r.BucketAction[0].GetBucketId().GetBucket()["name"] != "open" {
		t.Fatalf("Redis down: %v, want only the blanket bucket answered", r)
	}
	srv.Start()
	clock.Advance(interval)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := c.report(usage(open, interval, 1, 0), usage(api, interval, 10, 0)) // the blanket is always answered
		if len(r.GetBucketAction()) == 2 {
			if s, _ := share(r.BucketAction[1]); s > 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis back, still no share: %v", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
