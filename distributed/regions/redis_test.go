package regions

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestRedisCoordinator: heartbeats and demands go in and come back summed per region, a
// proposal is written only over the state it read (compare-and-set), and no Redis key
// holds the rate-limit key itself.
func TestRedisCoordinator(t *testing.T) {
	rc := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	prefix := "test:regions:" + time.Now().Format("150405.000000") + ":"
	t.Cleanup(func() {
		if keys, _ := rc.Keys(ctx, prefix+"*").Result(); len(keys) > 0 {
			rc.Del(ctx, keys...)
		}
	})
	c := NewRedisCoordinator(rc, prefix)
	const key = "api_key=sk-live-secret"
	at := time.Now().UnixNano()
	exchange := func(region, instance string, demand float64) *Exchange {
		t.Helper()
		x := &Exchange{Region: region, Instance: instance, At: at, Live: time.Second, Keys: []KeyExchange{{Key: key, Demand: demand, TTL: time.Minute}}}
		if err := c.Exchange(ctx, x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	exchange("eu", "eu-1", 30)
	exchange("eu", "eu-2", 20)
	x := exchange("us", "us-1", 5)
	if d := x.Keys[0].Demands; d["eu"] != 50 || d["us"] != 5 || len(d) != 2 {
		t.Fatalf("demands %v, want eu 50 (two instances), us 5", d)
	}
	if len(x.Heartbeats) != 2 || x.Heartbeats["eu"] != at {
		t.Fatalf("heartbeats %v", x.Heartbeats)
	}
	if x.Keys[0].State != nil {
		t.Fatalf("state %q before any proposal", x.Keys[0].State)
	}
	ps := []Proposal{{Key: key, Old: nil, New: []byte("one"), At: at, TTL: time.Minute}, {Key: key, Old: nil, New: []byte("two"), At: at, TTL: time.Minute}}
	if err := c.Propose(ctx, ps); err != nil {
		t.Fatal(err)
	}
	if !ps[0].Written || ps[1].Written {
		t.Fatalf("written %v %v, want the first only (the second read a state that is gone)", ps[0].Written, ps[1].Written)
	}
	if s := exchange("us", "us-1", 5).Keys[0].State; string(s) != "one" {
		t.Fatalf("state %q, want one", s)
	}
	// A record older than Live no longer counts.
	at += int64(2 * time.Second)
	if d := exchange("us", "us-1", 5).Keys[0].Demands; d["eu"] != 0 || d["us"] != 5 {
		t.Fatalf("demands %v after eu's records aged, want us alone", d)
	}
	keys, err := rc.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) != 3 {
		t.Fatalf("keys %v %v, want the heartbeats and the key's demands and state", keys, err)
	}
	for _, k := range keys {
		if strings.Contains(k, "sk-live") {
			t.Fatalf("Redis key %q holds the rate-limit key", k)
		}
		if ttl := rc.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Fatalf("%s has no TTL (%v)", k, ttl)
		}
	}
}
