package redis_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/redis"
)

// TestNoGoroutinesOfItsOwn: a store sends its pipelines from its callers' goroutines (flat
// combining), so an idle store holds no goroutine: 50 of them add none (a store with
// pipeline workers added WithMaxInFlight goroutines each).
func TestNoGoroutinesOfItsOwn(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never contacted
	defer c.Close()
	before := runtime.NumGoroutine()
	stores := make([]*redis.Store, 50)
	for i := range stores {
		s, err := redis.New(c, redis.WithMaxInFlight(4))
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	after := runtime.NumGoroutine()
	for _, s := range stores {
		_ = s.Close()
	}
	if after-before >= len(stores) {
		t.Fatalf("50 idle stores added %d goroutines (%d before, %d after)", after-before, before, after)
	}
}

// TestCombiningCallersGiveUp: 64 callers decide through one pipeline at a time, many with
// contexts that end before their answer can come (cancelled at once, or with deadlines of
// up to 2 ms), so that callers leave the queue, and callers whose turn to lead has come give
// up, at every step of the combining. Every call ends with a decision or ErrStoreUnavailable;
// afterwards no pipeline is left under way and the store decides at once: no turn to lead was
// lost with a caller that gave up.
func TestCombiningCallersGiveUp(t *testing.T) {
	c := standalone(t)
	s := newStore(t, c, redis.WithMaxInFlight(1))
	rule := sluice.GCRA(1_000_000, time.Second, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 100 {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				switch rng.IntN(3) {
				case 0:
					ctx, cancel = context.WithCancel(ctx)
					cancel()
				case 1:
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(2000))*time.Microsecond)
				}
				_, err := s.Take(ctx, sluice.Request{Key: keyOf(g, i), Rule: rule, N: 1})
				cancel()
				if err != nil && !errors.Is(err, sluice.ErrStoreUnavailable) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a call failed with %v, want a decision or ErrStoreUnavailable", err)
	}
	// A pipeline whose leader's caller gave up runs on in a goroutine of its own until its
	// replies or its deadline (the store's timeout): on a loaded machine one may still be under
	// way when the last caller returns, so every pipeline must end by then, none left leading.
	testenv.Eventually(t, 10*time.Second, "every pipeline ended after its callers gave up", func() bool { return redis.Leaders(s) == 0 })
	var wg2 sync.WaitGroup
	for g := range 8 { // concurrent, so that they queue behind a leader
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			if _, err := s.Take(context.Background(), sluice.Request{Key: keyOf(g, 0), Rule: rule, N: 1}); err != nil {
				t.Errorf("after the callers that gave up: %v", err)
			}
		}()
	}
	wg2.Wait()
}

func keyOf(g, i int) string { return string(rune('a'+g%26)) + string(rune('a'+i%26)) }

// TestDefaultPipelinesInFlight: by default at most 2 pipelines are in flight at once (fewer,
// fuller pipelines cost Redis less CPU per decision; see WithMaxInFlight), each on a
// connection of its own, plus the one of a caller that found the store idle (the direct
// path). 64 callers decide at once on a server that never answers: by 300 ms, well before
// their 2 s timeout, at most 3 connections have been opened.
func TestDefaultPipelinesInFlight(t *testing.T) {
	f := newFakeServer(t)
	c := goredis.NewClient(&goredis.Options{Addr: f.addr(), MaxRetries: -1, ContextTimeoutEnabled: true, PoolSize: 64})
	defer c.Close()
	s, err := redis.New(c, redis.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = s.Take(context.Background(), sluice.Request{Key: keyOf(g, 0), Rule: sluice.GCRA(10, time.Second, 0), N: 1})
		}()
	}
	time.Sleep(300 * time.Millisecond)
	conns := f.conns.Load()
	wg.Wait()
	if conns > 1+2 {
		t.Fatalf("%d connections opened by 64 concurrent callers, want at most 3 (2 pipelines in flight and the direct path)", conns)
	}
	if redis.DefaultMaxInFlight != 2 {
		t.Fatalf("DefaultMaxInFlight = %d, want 2", redis.DefaultMaxInFlight)
	}
}
