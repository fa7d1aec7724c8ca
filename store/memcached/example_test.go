package memcached_test

import (
	"context"
	"log"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memcached"
)

// A limit shared through memcached servers. (Not run: it needs a server.)
func ExampleNewFromURL() {
	store, err := memcached.NewFromURL("memcached://127.0.0.1:11211")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	limiter := sluice.New(store)
	if d, err := limiter.Allow(context.Background(), "client:42", sluice.PerSecond(10)); err == nil && !d.Allowed {
		log.Printf("429, retry after %v", d.RetryAfter)
	}
}
