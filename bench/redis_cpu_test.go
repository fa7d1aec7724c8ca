package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
)

// captureHook records the arguments of the last single-key EVALSHA a client sent, and of the
// last one on several keys (the store's batched script call).
type captureHook struct {
	mu    sync.Mutex
	args  []any
	multi []any
}

func (h *captureHook) record(cmd goredis.Cmder) {
	if args := cmd.Args(); len(args) > 3 && args[0] == "evalsha" {
		h.mu.Lock()
		if k, _ := args[2].(int); k > 1 {
			h.multi = append([]any(nil), args...)
		} else {
			h.args = append([]any(nil), args...)
		}
		h.mu.Unlock()
	}
}

// batchOf returns a batched script call of k keys made from a captured one: its first key's
// parameters (and extra argument, if any) for each key. The keys are placeholders.
func batchOf(multi []any, k int) []any {
	n := multi[2].(int)
	extra := len(multi) == 3+3*n
	out := []any{"evalsha", multi[1], k}
	for i := 0; i < k; i++ {
		out = append(out, "")
	}
	for i := 0; i < k; i++ {
		out = append(out, multi[3+n])
	}
	if extra {
		for i := 0; i < k; i++ {
			out = append(out, multi[3+2*n])
		}
	}
	return out
}

func (h *captureHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *captureHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.record(cmd)
		return next(ctx, cmd)
	}
}

func (h *captureHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			h.record(cmd)
		}
		return next(ctx, cmds)
	}
}

// BenchmarkRedisCPUReplay measures Redis CPU per decision the way redis-benchmark -c 4 -P 8
// measures the anchors: the store makes one decision, a hook captures the exact EVALSHA it
// sent, and 4 connections replay it in pipelines of 8 over 1,000 keys (the client clock stands
// still at the captured instant; the server clock reads TIME). A light client, so the figure
// is the script's own cost rather than the cost of sharing two cores with a busy Go process.
// Likewise batch_of_K: the store's batched script call (captured while 64 goroutines decide),
// rebuilt with K keys, replayed alike; its figure is per decision (the call's usec over K).
// Anchors, replayed alike: `return 1` and the plain HMGET/HSET/PEXPIRE token bucket.
func BenchmarkRedisCPUReplay(b *testing.B) {
	c := redisClient(b)
	hook := &captureHook{}
	c.AddHook(hook)
	ctx := context.Background()
	prefix := fmt.Sprintf("bench:cpur:%d:", time.Now().UnixNano())
	b.Cleanup(func() { unlinkPrefix(c, prefix) })
	type template struct {
		name string
		args []any // EVALSHA sha K keys ARGV...; the keys are replaced per call
	}
	var tpls []template
	algs := []sluice.Algorithm{sluice.AlgorithmGCRA, sluice.AlgorithmTokenBucket, sluice.AlgorithmLeakyBucket,
		sluice.AlgorithmFixedWindow, sluice.AlgorithmSlidingWindow}
	for _, a := range algs {
		for _, clock := range []string{"server", "client"} {
			s := cpuStore(b, c, prefix, a, clock)
			rule := sluice.Rule{Algorithm: a, Limit: perSecond, Period: time.Second}
			if _, err := s.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1}); err != nil {
				b.Fatal(err)
			}
			hook.mu.Lock()
			name := "sluice/" + a.String() + "/" + clock + "_clock"
			tpls = append(tpls, template{name: name, args: hook.args})
			hook.multi = nil
			hook.mu.Unlock()
			for try := 0; try < 10 && hook.multi == nil; try++ { // concurrent decisions batch
				var wg sync.WaitGroup
				for g := 0; g < 64; g++ {
					wg.Add(1)
					go func(g int) {
						defer wg.Done()
						_, _ = s.Take(ctx, sluice.Request{Key: keys[g], Rule: rule, N: 1})
					}(g)
				}
				wg.Wait()
			}
			_ = s.Close()
			hook.mu.Lock()
			if hook.multi == nil { // a store that does not batch (BEFORE= in redis_cpu.sh)
				b.Logf("%s: no batched script call captured", name)
			}
			for _, k := range []int{8, 32} {
				if hook.multi != nil {
					tpls = append(tpls, template{name: fmt.Sprintf("%s/batch_of_%d", name, k), args: batchOf(hook.multi, k)})
				}
			}
			hook.mu.Unlock()
		}
	}
	ret1 := goredis.NewScript("return 1")
	plain := goredis.NewScript(plainBucketLua)
	for _, sc := range []*goredis.Script{ret1, plain} {
		if err := sc.Load(ctx, c).Err(); err != nil {
			b.Fatal(err)
		}
	}
	// The anchors go first: the first contender of a process runs while the test binary is
	// still starting up, which costs the server a little.
	tpls = append([]template{
		{name: "baseline/return_1", args: []any{"evalsha", ret1.Hash(), 1, prefix + "ret1"}},
		{name: "baseline/plain_hmget_hset_pexpire", args: []any{"evalsha", plain.Hash(), 1, prefix + "plain",
			perSecond, perSecond, time.Now().UnixMilli(), 1}},
	}, tpls...)
	for _, tpl := range tpls {
		b.Run(tpl.name, func(b *testing.B) {
			k := tpl.args[2].(int)
			key := prefix + tpl.name + ":"
			send := func(n int, rng *rand.Rand) {
				pipe := c.Pipeline()
				for i := 0; i < n; i++ {
					args := append([]any(nil), tpl.args...)
					for j := 0; j < k; j++ {
						args[3+j] = key + strconv.Itoa(rng.IntN(1000))
					}
					_ = pipe.Process(ctx, goredis.NewCmd(ctx, args...))
				}
				if _, err := pipe.Exec(ctx); err != nil {
					b.Error(err)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 125; i++ { // create the keys
				send(8, rng)
			}
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			calls := 20_000 / k
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func(w uint64) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(w, 3))
					for i := 0; i < calls/4/8; i++ {
						send(8, rng)
					}
				}(uint64(w))
			}
			wg.Wait()
			n, usec := commandStats(b, c)
			b.ReportMetric(usec/float64(n)/float64(k), "redis-µs/decision")
			b.ReportMetric(float64(k), "decisions/call")
			b.ReportMetric(0, "ns/op")
		})
	}
}
