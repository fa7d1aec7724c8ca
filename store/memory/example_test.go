package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// A limiter on the in-process store: a token bucket of 3, refilled 1 a second.
func ExampleNew() {
	store, err := memory.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	limiter := sluice.New(store)
	rule := sluice.TokenBucket(1, time.Second, 3)
	for i := 0; i < 4; i++ {
		d, err := limiter.Allow(context.Background(), "client:42", rule)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	}
	// Output:
	// allowed=true remaining=2
	// allowed=true remaining=1
	// allowed=true remaining=0
	// allowed=false remaining=0
}

// Bounds on the store's memory: past either, a new key evicts one closest to full.
func ExampleWithMaxKeys() {
	store, err := memory.New(memory.WithMaxKeys(100_000), memory.WithMaxBytes(64<<20))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	_, err = memory.New(memory.WithMaxKeys(-1))
	fmt.Println(err != nil)
	// Output: true
}
