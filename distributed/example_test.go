package distributed_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/store/memory"
)

// The decorators wrap a Store and are Stores: here the fallback over the over-limit cache
// over async counters, on a memory store standing in for Redis. Close them outside in.
func ExampleNewFallback() {
	store, err := memory.New() // in production: a *redis.Store
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	async, err := distributed.NewAsync(store, distributed.WithInterval(100*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer async.Close() // pushes the pending deltas
	over, err := distributed.NewOverLimit(async)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer over.Close()
	fb, err := distributed.NewFallback(over, distributed.WithTimeout(50*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer fb.Close()
	limiter := sluice.New(fb)
	for i := 0; i < 3; i++ {
		d, err := limiter.Allow(context.Background(), "client:42", sluice.FixedWindow(2, time.Minute))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(d.Allowed)
	}
	// Output:
	// true
	// true
	// false
}

// A decorator refuses what it cannot wrap, naming the option.
func ExampleNewAsync_invalid() {
	_, err := distributed.NewAsync(nil)
	fmt.Println(err != nil)
	// Output: true
}
