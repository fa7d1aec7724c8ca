package bench

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/store/memory"
)

// The distribution-mode workloads (issue 4): the cost of one decision in sync mode (a store
// call per decision), async mode (local view, background sync) and under the over-limit cache
// (a key already denied), on the memory store here and on Redis in modes_redis_test.go, in
// the same run.
//
//	cd bench && SLUICE_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench Modes -benchmem -count 3

// modeRule admits (almost) everything: the admit path is measured.
var modeRule = sluice.SlidingWindow(perSecond*1000, time.Second, 1)

// deniedRule denies every request after the first of each hour: the denial path.
var deniedRule = sluice.FixedWindow(1, time.Hour)

func benchDecide(b *testing.B, s sluice.Store, rule sluice.Rule, keyCount int) {
	b.Helper()
	ctx := context.Background()
	for i := range keyCount { // warm the keys (and, for denials, deny them once)
		s.Take(ctx, sluice.Request{Key: keys[i], Rule: rule, N: 1})
		s.Take(ctx, sluice.Request{Key: keys[i], Rule: rule, N: 1})
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, err := s.Take(ctx, sluice.Request{Key: keys[i], Rule: rule, N: 1}); err != nil {
			b.Fatal(err)
		}
		if i++; i == keyCount {
			i = 0
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

func newMemoryStore(b *testing.B) *memory.Store {
	b.Helper()
	s, err := memory.New()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkModesMemory(b *testing.B) {
	b.Run("sync/allow", func(b *testing.B) { benchDecide(b, newMemoryStore(b), modeRule, 1000) })
	b.Run("sync/denied", func(b *testing.B) { benchDecide(b, newMemoryStore(b), deniedRule, 1000) })
	b.Run("async/allow", func(b *testing.B) {
		a, err := distributed.NewAsync(newMemoryStore(b), distributed.WithInterval(100*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		defer a.Close()
		benchDecide(b, a, modeRule, 1000)
	})
	b.Run("overlimit/denied", func(b *testing.B) {
		o, err := distributed.NewOverLimit(newMemoryStore(b))
		if err != nil {
			b.Fatal(err)
		}
		benchDecide(b, o, deniedRule, 1000)
	})
}

// BenchmarkModesFallback is the healthy-path overhead of distributed.Fallback: the same
// memory-store decision with and without the decorator, in the same run.
func BenchmarkModesFallback(b *testing.B) {
	b.Run("memory/allow", func(b *testing.B) { benchDecide(b, newMemoryStore(b), modeRule, 1000) })
	b.Run("fallback/allow", func(b *testing.B) {
		f, err := distributed.NewFallback(newMemoryStore(b))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		benchDecide(b, f, modeRule, 1000)
	})
}
