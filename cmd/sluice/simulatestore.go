package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/simulate"
	"github.com/sluicehq/sluice/store/redis"
)

// simulateStore sets cfg.Store from the --store flag: "memory" (the default, the simulator's
// own store) or a redis:// URL. On Redis every algorithm and mode gets a fresh key prefix and
// the store takes the simulation's virtual clock as client time, so the run stays
// deterministic in what it decides. It returns a function that releases the client.
func simulateStore(cfg *simulate.Config, url string) (func(), error) {
	if url == "" || url == "memory" {
		return func() {}, nil
	}
	if !strings.HasPrefix(url, "redis://") && !strings.HasPrefix(url, "rediss://") {
		return nil, fmt.Errorf("store: unknown %q (want memory or redis://host:port/db)", url)
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	client := goredis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("store: %s: %w", url, err)
	}
	run := fmt.Sprintf("sluice-simulate:%x:", time.Now().UnixNano())
	var n atomic.Int64
	cfg.Store = func(clock sluice.Clock) (sluice.Store, error) {
		prefix := fmt.Sprintf("%s%d:", run, n.Add(1))
		return redis.New(client, redis.WithClock(clock), redis.WithPrefix(prefix), redis.WithTimeout(time.Second))
	}
	return func() { client.Close() }, nil
}
