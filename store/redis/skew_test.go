package redis_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/redis"
)

// Clock skew (issue 16, item 6). By default the scripts read Redis's TIME, so the clocks of
// the instances play no part: two instances whose clocks disagree still admit at most the
// limit in every window. With client clocks (redis.WithClock) the error is measured.

// TestClockSkewServerTime: two stores deciding one fixed-window key from 4 goroutines for
// 2 s (20 s under SLUICE_CHAOS) admit at most the limit in each of Redis's windows. The
// windows are told apart by where each decision says its window ends (ResetAfter), read on
// this process's monotonic clock, so no client clock is trusted.
func TestClockSkewServerTime(t *testing.T) {
	run := 2 * time.Second
	if testenv.Chaos() {
		run = 20 * time.Second
	}
	c := standalone(t)
	prefix := testPrefix(t, c)
	a := newStore(t, c, redis.WithPrefix(prefix))
	b := newStore(t, c, redis.WithPrefix(prefix))
	rule := sluice.FixedWindow(50, 500*time.Millisecond)
	ctx := context.Background()
	var mu sync.Mutex
	var ends []time.Time // window end of each admission
	var wg sync.WaitGroup
	stop := time.Now().Add(run)
	for i := range 4 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				d, err := s.Take(ctx, sluice.Request{Key: "skew", Rule: rule, N: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					ends = append(ends, time.Now().Add(d.ResetAfter))
					mu.Unlock()
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if len(ends) == 0 {
		t.Fatal("nothing admitted")
	}
	perWindow := map[int64]int64{}
	for _, e := range ends {
		perWindow[int64(math.Round(float64(e.Sub(ends[0]))/float64(rule.Period)))]++
	}
	var most int64
	for _, n := range perWindow {
		most = max(most, n)
	}
	t.Logf("server TIME: %d admitted in %d windows of %v over %v, at most %d in one (limit %d)", len(ends), len(perWindow), rule.Period, run, most, rule.Limit)
	if most > rule.Limit {
		t.Errorf("%d admitted in one window, limit %d", most, rule.Limit)
	}
}

// TestClockSkewClientClock measures the error of client clocks: instance A's clock runs 2 s
// ahead of the true time, B's 2 s behind, and halfway through B's jumps back 5 s more. Each
// takes 5 requests every 50 ms of simulated time for 10 s; admissions are counted per window
// of the true time. The figure is documented in docs/RELIABILITY.md; the assertion is the
// floor that must hold whatever the clocks: no window admits more than the limit per
// instance.
func TestClockSkewClientClock(t *testing.T) {
	for _, rule := range []sluice.Rule{sluice.FixedWindow(10, time.Second), sluice.TokenBucket(10, time.Second, 10), sluice.GCRA(10, time.Second, 10)} {
		t.Run(string(rule.Algorithm), func(t *testing.T) {
			c := standalone(t)
			prefix := testPrefix(t, c)
			truth := t0
			clockA := sluicetest.NewManualClock(truth.Add(2 * time.Second))
			clockB := sluicetest.NewManualClock(truth.Add(-2 * time.Second))
			a := newStore(t, c, redis.WithPrefix(prefix), redis.WithClock(clockA))
			b := newStore(t, c, redis.WithPrefix(prefix), redis.WithClock(clockB))
			ctx := context.Background()
			perWindow := map[int64]int64{}
			const step = 50 * time.Millisecond
			for i := range 200 {
				if i == 100 {
					clockB.Advance(-5 * time.Second)
				}
				for _, s := range []*redis.Store{a, b} {
					for range 5 {
						d, err := s.Take(ctx, sluice.Request{Key: "skew", Rule: rule, N: 1})
						if err != nil {
							t.Fatal(err)
						}
						if d.Allowed {
							perWindow[int64(truth.Sub(t0)/time.Second)]++
						}
					}
				}
				truth = truth.Add(step)
				clockA.Advance(step)
				clockB.Advance(step)
			}
			var most, total int64
			for _, n := range perWindow {
				most = max(most, n)
				total += n
			}
			t.Logf("client clocks +2 s / -2 s, then -7 s: %d admitted in 10 s of true time (limit %d/s: %d); at most %d in one true second (%.1fx the limit)",
				total, rule.Limit, 10*rule.Limit, most, float64(most)/float64(rule.Limit))
			if most > 2*rule.Limit {
				t.Errorf("%d admitted in one second by 2 instances, more than %d each", most, rule.Limit)
			}
		})
	}
}
