package memory_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// benchRule admits (almost) everything, so the benchmarks measure the admit path.
func benchRule(a sluice.Algorithm) sluice.Rule {
	limit := int64(1_000_000_000)
	if a == sluice.AlgorithmSlidingLog {
		limit = 1000 // O(limit) memory: the log's cost is eviction, measured in the denied path
	}
	if a == sluice.AlgorithmGCRA {
		limit = 1_000_000
	}
	return sluice.Rule{Algorithm: a, Limit: limit, Period: time.Second}
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	return keys
}

// BenchmarkAllowN measures Limiter.AllowN on the memory store with the system clock: one key,
// 10k keys, and 10k keys from parallel goroutines.
func BenchmarkAllowN(b *testing.B) {
	ctx := context.Background()
	keys := benchKeys(10_000)
	for _, a := range sluice.Algorithms() {
		rule := benchRule(a)
		b.Run(a.String()+"/one_key", func(b *testing.B) {
			s, _ := memory.New()
			defer s.Close()
			l := sluice.New(s)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				l.AllowN(ctx, "user:1", rule, 1)
			}
		})
		b.Run(a.String()+"/10k_keys", func(b *testing.B) {
			s, _ := memory.New()
			defer s.Close()
			l := sluice.New(s)
			for _, k := range keys {
				l.AllowN(ctx, k, rule, 1)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.AllowN(ctx, keys[i%len(keys)], rule, 1)
			}
		})
		b.Run(a.String()+"/10k_keys_parallel", func(b *testing.B) {
			s, _ := memory.New()
			defer s.Close()
			l := sluice.New(s)
			for _, k := range keys {
				l.AllowN(ctx, k, rule, 1)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(time.Now().UnixNano())
				for pb.Next() {
					i++
					l.AllowN(ctx, keys[i%len(keys)], rule, 1)
				}
			})
		})
	}
}

// BenchmarkStoreTake measures Store.Take on one key, the path of every caller but
// Limiter.AllowN (which takes the scalar fast path): the decorators, Limiter.AllowAll, Wait and
// Settle.
func BenchmarkStoreTake(b *testing.B) {
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		rule := benchRule(a)
		b.Run(a.String(), func(b *testing.B) {
			s, _ := memory.New()
			defer s.Close()
			req := sluice.Request{Key: "user:1", Rule: rule, N: 1}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s.Take(ctx, req)
			}
		})
	}
}

// BenchmarkBytesPerKey reports the heap a key costs in the store (entry, index slot, state and
// key of 12 bytes; the compiled rule is shared), per algorithm, over 100,000 keys:
//
//	go test -run '^$' -bench BytesPerKey -benchtime 1x ./store/memory/
func BenchmarkBytesPerKey(b *testing.B) {
	ctx := context.Background()
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%07d", i)
	}
	rules := map[string]sluice.Rule{}
	for _, a := range sluice.Algorithms() {
		rules[a.String()] = sluice.Rule{Algorithm: a, Limit: 100, Period: time.Minute}
	}
	rules["sliding_window_12"] = sluice.Rule{Algorithm: sluice.AlgorithmSlidingWindow, Limit: 100, Period: time.Minute, SubWindows: 12}
	rules["sliding_log_1000"] = sluice.Rule{Algorithm: sluice.AlgorithmSlidingLog, Limit: 1000, Period: time.Minute}
	for name, rule := range rules {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s, _ := memory.New(memory.WithSweepInterval(-1), memory.WithMaxBytes(math.MaxInt64)) // every key held: the budget would evict big logs
				for _, k := range keys {
					s.Take(ctx, sluice.Request{Key: k, Rule: rule, N: 1})
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(keys)), "bytes/key")
				runtime.KeepAlive(s)
			}
		})
	}
}

// BenchmarkNewKeyFullStore measures a decision on a new key when the store is at WithMaxKeys
// (100,000 keys of one request each, token bucket 100 a minute), so each new key first evicts
// one: the cost of a flood of unique keys, arriving at 100,000 a second (the clock moves 10 µs
// per key) or all at one instant (burst: the clock does not move, no key looks idle).
//
//	go test -run '^$' -bench NewKeyFullStore -benchtime 200000x ./store/memory/
func BenchmarkNewKeyFullStore(b *testing.B) {
	for name, step := range map[string]time.Duration{"100k_per_s": 10 * time.Microsecond, "burst": 0} {
		b.Run(name, func(b *testing.B) {
			const held = 100_000
			ctx := context.Background()
			rule := sluice.TokenBucket(100, time.Minute, 100)
			keys := make([]string, held+b.N)
			for i := range keys {
				keys[i] = fmt.Sprintf("flood:%d", i)
			}
			clock := sluicetest.NewManualClock(time.Unix(1_700_000_000, 0))
			s, _ := memory.New(memory.WithMaxKeys(held), memory.WithClock(clock), memory.WithSweepInterval(-1))
			defer s.Close()
			for _, k := range keys[:held] {
				s.Take(ctx, sluice.Request{Key: k, Rule: rule, N: 1})
				clock.Advance(step)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Take(ctx, sluice.Request{Key: keys[held+i], Rule: rule, N: 1}); err != nil {
					b.Fatal(err)
				}
				clock.Advance(step)
			}
		})
	}
}
