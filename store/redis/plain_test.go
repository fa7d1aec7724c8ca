package redis_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/redis"
)

// TestDifferentialCounters holds the windows kept in counters and decided without Lua
// (WithCounters) to package algorithm, the memory store: the same random requests (takes,
// peeks, refunds, settles, criticality holdbacks) at the same instants of a manual clock, with
// limit changes, give the same decisions (see differential).
func TestDifferentialCounters(t *testing.T) {
	differential(t, []sluice.Algorithm{sluice.AlgorithmFixedWindow, sluice.AlgorithmSlidingWindow}, true)
}

// TestCountersClockBack states where counters differ from the scripts when the clock goes
// back: a decision counts in its own window's counter, so a step back into an earlier window
// finds that window's count (here empty) where the scripts stay in the newest one.
func TestCountersClockBack(t *testing.T) {
	c := standalone(t)
	clock := sluicetest.NewManualClock(t0)
	ctx := context.Background()
	rule := sluice.FixedWindow(2, time.Second)
	for _, counters := range []bool{false, true} {
		opts := []redis.Option{redis.WithClock(clock)}
		if counters {
			opts = append(opts, redis.WithCounters())
		}
		s := newStore(t, c, opts...)
		clock.Set(t0.Add(1500 * time.Millisecond))
		for range 2 {
			if d, err := s.Take(ctx, sluice.Request{Key: "back", Rule: rule, N: 1}); err != nil || !d.Allowed {
				t.Fatalf("counters %v: %+v %v", counters, d, err)
			}
		}
		clock.Set(t0.Add(900 * time.Millisecond))
		d, err := s.Take(ctx, sluice.Request{Key: "back", Rule: rule, N: 1})
		if err != nil || d.Allowed != counters {
			t.Errorf("counters %v: a take after the clock went back to the previous window: %+v %v, want allowed %v", counters, d, err, counters)
		}
	}
}

// TestCountersServerClock: with the server's clock, a store whose estimate of it is wrong by
// whole periods (so every decision's window is chosen wrong at first) still decides each
// request in the server's window: the units counted in the wrong one are given back and the
// decision is made again. Then, the estimate corrected by the TIME replies, concurrent
// callers on one key are admitted exactly up to the limit in one window, and every key written
// has a TTL (checked at the end, as for every test prefix).
func TestCountersServerClock(t *testing.T) {
	c := standalone(t)
	ctx := context.Background()
	rule := sluice.FixedWindow(1000, time.Hour) // one window for the whole test, unless it runs at the hour
	s := newStore(t, c, redis.WithCounters())
	redis.SetServerOffset(s, 3*time.Hour)
	if d, err := s.Take(ctx, sluice.Request{Key: "srv", Rule: rule, N: 1}); err != nil || !d.Allowed || d.Remaining != 999 {
		t.Fatalf("a take with the estimate 3 h ahead: %+v %v", d, err)
	}
	keys, err := c.Keys(ctx, s.Key("srv")+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, k := range keys {
		v, err := c.Get(ctx, k).Int64()
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	if sum != 1 {
		t.Fatalf("counters after one take: %v sum to %d, want 1 (the wrong windows' units given back)", keys, sum)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				d, err := s.Take(ctx, sluice.Request{Key: "srv", Rule: rule, N: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	// Never more than the 999 left; fewer only by takes denied while a concurrent denial's
	// units were counted, at the end (at most one per caller).
	if got := admitted.Load(); (got > 999 || got < 999-32) && time.Now().Minute() != 0 {
		t.Errorf("%d of 1280 concurrent takes admitted, want the 999 left (at most 32 fewer)", got)
	}
}

// TestCountersFromURL: counters=true in the URL keeps the windows in counters (their keys are
// the counters'), and a window's denied take counted as envoyproxy/ratelimit counts it
// (sluice.TakeCountingDenied) keeps its units: the next window-mate is over the limit too.
func TestCountersFromURL(t *testing.T) {
	ctx := context.Background()
	s, err := redis.NewFromURL("redis://"+testenv.RedisAddr(t)+"/0?counters=true", redis.WithPrefix(testPrefix(t, standalone(t))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rule := sluice.FixedWindow(2, time.Hour)
	key := "url-counters"
	for i, want := range []bool{true, false} {
		d, err := sluice.TakeCountingDenied(ctx, s, sluice.Request{Key: key, Rule: rule, N: 2})
		if err != nil || d.Allowed != want {
			t.Fatalf("take %d: %+v %v, want allowed %v", i, d, err, want)
		}
	}
	keys, err := s.Client().Keys(ctx, s.Key(key)+":f:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("counter keys %v %v, want the window's one", keys, err)
	}
	if n, err := s.Client().Get(ctx, keys[0]).Int64(); err != nil || (n != 4 && time.Now().Minute() != 0) {
		t.Fatalf("the window's count: %d %v, want 4 (2 admitted, 2 denied and counted)", n, err)
	}
	if d, err := s.Take(ctx, sluice.Request{Key: key, Rule: rule, N: -1}); err != nil || d.Remaining != 0 {
		t.Fatalf("a refund of 1 after the counted denial: %+v %v, want still nothing left", d, err)
	}
}
