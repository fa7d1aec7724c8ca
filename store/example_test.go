package store_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store"
)

func ExampleOpen() {
	ctx := context.Background()
	// "redis://127.0.0.1:6379/0", "redis-cluster://...", "redis-sentinel://..." share the
	// limits across instances; Mode and Fallback add package distributed's decorators.
	st, closer, err := store.Open(ctx, store.Config{Backend: store.Backend{URL: "memory"}, Decorators: store.Decorators{Mode: "overlimit", Fallback: "local"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closer.Close() // flushes the decorators, then closes the store and its client
	limiter := sluice.New(st)
	for i := 0; i < 3; i++ {
		d, err := limiter.Allow(ctx, "client:42", sluice.FixedWindow(2, time.Minute))
		fmt.Println(d.Allowed, err)
	}
	_, _, err = store.Open(ctx, store.Config{Backend: store.Backend{URL: "memory"}, Decorators: store.Decorators{Mode: "eventually"}})
	fmt.Println(err)
	// Output:
	// true <nil>
	// true <nil>
	// false <nil>
	// store: mode: unknown distribution mode "eventually" (want sync, overlimit or async)
}
