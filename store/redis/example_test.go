package redis_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/redis"
)

// A limit shared by every instance through one Redis. (Not run: it needs a server.)
func ExampleNewFromURL() {
	store, err := redis.NewFromURL("redis://127.0.0.1:6379/0", redis.WithTimeout(100*time.Millisecond))
	if err != nil {
		log.Fatal(err) // a malformed URL, named
	}
	defer store.Close()
	limiter := sluice.New(store)
	d, err := limiter.Allow(context.Background(), "client:42", sluice.PerMinute(100))
	switch {
	case errors.Is(err, sluice.ErrStoreUnavailable):
		log.Print("Redis unreachable: fail open, fail closed, or wrap the store in distributed.NewFallback")
	case err != nil:
		log.Fatal(err)
	case !d.Allowed:
		log.Printf("429, retry after %v", d.RetryAfter)
	}
}
