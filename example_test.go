package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

func ExampleLimiter_Allow() {
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store, _ := memory.New(memory.WithClock(clock)) // omit WithClock outside tests
	defer store.Close()
	limiter := sluice.New(store)
	rule := sluice.TokenBucket(2, time.Second, 0) // 2 a second, bursts of 2

	for i := 0; i < 3; i++ {
		d, err := limiter.Allow(context.Background(), "client:42", rule)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("allowed=%v remaining=%d retry_after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// allowed=true remaining=1 retry_after=0s
	// allowed=true remaining=0 retry_after=0s
	// allowed=false remaining=0 retry_after=500ms
}

// A cost known only after the work (LLM tokens): take an estimate, then settle the
// difference. An overage is charged past the limit, and the key's next requests wait for the
// debt to be paid.
func ExampleLimiter_Settle() {
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store, _ := memory.New(memory.WithClock(clock)) // omit WithClock outside tests
	defer store.Close()
	limiter := sluice.New(store)
	ctx := context.Background()
	rule := sluice.TokenBucket(1000, time.Minute, 0) // 1,000 tokens a minute

	const estimate = 200
	d, _ := limiter.AllowN(ctx, "tenant:7", rule, estimate)
	fmt.Printf("estimated=%v remaining=%d\n", d.Allowed, d.Remaining)

	used := int64(1500) // the response's real cost
	d, _ = limiter.Settle(ctx, "tenant:7", rule, used-estimate)
	fmt.Printf("settled: remaining=%d debt paid in %v\n", d.Remaining, d.RetryAfter)

	d, _ = limiter.Allow(ctx, "tenant:7", rule)
	fmt.Printf("next: allowed=%v retry_after=%v\n", d.Allowed, d.RetryAfter)
	// Output:
	// estimated=true remaining=800
	// settled: remaining=0 debt paid in 30s
	// next: allowed=false retry_after=30.06s
}

func ExampleLimiter_AllowAll() {
	store, _ := memory.New()
	defer store.Close()
	limiter := sluice.New(store)
	checks := []sluice.Check{
		{Key: "client:42", Rule: sluice.PerHour(1000)},                 // business quota
		{Key: "instance", Rule: sluice.TokenBucket(1, time.Minute, 0)}, // overload guard
	}
	for i := 0; i < 2; i++ {
		d, _ := limiter.AllowAll(context.Background(), checks)
		fmt.Printf("allowed=%v quota left=%d\n", d.Allowed, checks[0].Decision.Remaining)
	}
	// Output:
	// allowed=true quota left=999
	// allowed=false quota left=999
}

func ExampleRule_Validate() {
	err := sluice.TokenBucket(10, time.Second, -1).Validate()
	fmt.Println(err)
	// Output: sluice: invalid rule: burst: must be between 0 (= limit) and 1000000000, got -1
}

func ExampleFieldError() {
	err := sluice.TokenBucket(10, time.Second, -1).Validate()
	var fe *sluice.FieldError
	if errors.As(err, &fe) {
		fmt.Printf("field %s: %s (invalid rule: %v)\n", fe.Field, fe.Reason, errors.Is(err, sluice.ErrInvalidRule))
	}
	// Output: field burst: must be between 0 (= limit) and 1000000000, got -1 (invalid rule: true)
}

// A concurrency limit: at most 2 reports built at once per tenant, across every process
// sharing the store. The slot is released when the work is done; if the process dies
// first, it comes back within the lease.
func ExampleLeases_Acquire() {
	store, _ := memory.New()
	defer store.Close()
	leases := sluice.NewLeases(store)
	defer leases.Close()
	ctx := context.Background()
	limit := sluice.InFlight{Limit: 2, Lease: 10 * time.Second}

	a, _ := leases.Acquire(ctx, "reports:tenant-1", limit)
	b, _ := leases.Acquire(ctx, "reports:tenant-1", limit)
	c, _ := leases.Acquire(ctx, "reports:tenant-1", limit)
	fmt.Println(a.Admitted, b.Admitted, c.Admitted, c.InFlight)
	_ = a.Release()
	d, _ := leases.Acquire(ctx, "reports:tenant-1", limit)
	fmt.Println(d.Admitted)
	_ = b.Release()
	_ = d.Release()
	// Output:
	// true true false 2
	// true
}
