package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/redis"
)

// The Redis sync-mode workloads: Sluice's Redis store (one script call per decision,
// coalesced into pipelines) against github.com/go-redis/redis_rate/v10 and the seed's naive
// sorted-set script, on the same Redis in the same run. They read SLUICE_REDIS_ADDR and skip
// when it is unset; they are run by hand (see docs/BENCHMARKS.md, section Redis):
//
//	cd bench && SLUICE_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench 'RedisThroughput' -benchtime 3s
//	cd bench && SLUICE_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench 'RedisMemory|RedisCPU' -benchtime 1x

// naiveLua is the seed's sliding log: every call, admitted or not, is recorded.
const naiveLua = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
redis.call('ZADD', key, now, ARGV[4])
local count = redis.call('ZCARD', key)
redis.call('EXPIRE', key, math.ceil(window / 1000))
if count <= limit then return 1 end
return 0
`

var naiveScript = goredis.NewScript(naiveLua)

func redisClient(b *testing.B) *goredis.Client {
	addr := os.Getenv("SLUICE_REDIS_ADDR")
	if addr == "" {
		b.Skip("SLUICE_REDIS_ADDR is not set")
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true,
		PoolSize: 128})
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// redisContender makes one decision on key; limit per period is its rule.
type redisContender struct {
	name    string
	pattern string // SCAN pattern of its keys
	decide  func(ctx context.Context, key string) (bool, error)
	close   func()
}

var memberSeq atomic.Int64

func redisContenders(b *testing.B, c *goredis.Client, prefix string, limit int64, period time.Duration, algs []sluice.Algorithm) []redisContender {
	var out []redisContender
	for _, a := range algs {
		s, err := redis.New(c, redis.WithPrefix(prefix+"sluice:"+a.String()+":"))
		if err != nil {
			b.Fatal(err)
		}
		l := sluice.New(s)
		rule := sluice.Rule{Algorithm: a, Limit: limit, Period: period}
		out = append(out, redisContender{
			name:    "sluice/" + a.String(),
			pattern: prefix + "sluice:" + a.String() + ":*",
			decide: func(ctx context.Context, key string) (bool, error) {
				d, err := l.Allow(ctx, key, rule)
				return d.Allowed, err
			},
			close: func() { _ = s.Close() },
		})
	}
	rl := redis_rate.NewLimiter(c)
	rrLimit := redis_rate.Limit{Rate: int(limit), Burst: int(limit), Period: period}
	out = append(out, redisContender{
		name:    "redis_rate",
		pattern: "rate:" + prefix + "redis_rate:*",
		decide: func(ctx context.Context, key string) (bool, error) {
			r, err := rl.Allow(ctx, prefix+"redis_rate:"+key, rrLimit)
			if err != nil {
				return false, err
			}
			return r.Allowed > 0, nil
		},
		close: func() {},
	})
	out = append(out, redisContender{
		name:    "naive_zset",
		pattern: prefix + "naive:*",
		decide: func(ctx context.Context, key string) (bool, error) {
			now := time.Now().UnixMilli()
			member := strconv.FormatInt(now, 10) + ":" + strconv.FormatInt(memberSeq.Add(1), 10)
			v, err := naiveScript.Run(ctx, c, []string{prefix + "naive:" + key}, now, period.Milliseconds(), limit, member).Int()
			return v == 1, err
		},
		close: func() {},
	})
	return out
}

var throughputAlgs = []sluice.Algorithm{sluice.AlgorithmGCRA, sluice.AlgorithmTokenBucket,
	sluice.AlgorithmSlidingWindow, sluice.AlgorithmFixedWindow}

// BenchmarkRedisThroughput: decisions/s and latency percentiles with 1 and 64 goroutines over
// 10k keys, with a limit high enough that (almost) every decision is admitted. The contenders
// run one after the other for each goroutine count; -count N repeats each sub-benchmark N times
// back to back, so to interleave the contenders' runs (a burst of load from other jobs then hits
// them alike) repeat the whole command with -count 1 instead.
func BenchmarkRedisThroughput(b *testing.B) {
	c := redisClient(b)
	prefix := fmt.Sprintf("bench:tp:%d:", time.Now().UnixNano())
	b.Cleanup(func() { unlinkPrefix(c, prefix) })
	cts := redisContenders(b, c, prefix, perSecond, time.Second, throughputAlgs)
	for _, g := range []int{1, 64} {
		for _, ct := range cts {
			b.Run(fmt.Sprintf("goroutines=%d/%s", g, ct.name), func(b *testing.B) {
				runLatency(b, g, ct.decide)
			})
		}
	}
	for _, ct := range cts {
		ct.close()
	}
}

// runLatency runs b.N decisions from g goroutines and reports decisions/s, p50 and p99.
func runLatency(b *testing.B, g int, decide func(ctx context.Context, key string) (bool, error)) {
	ctx := context.Background()
	var next atomic.Int64
	lat := make([][]time.Duration, g)
	var errs atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t := time.Now()
				if _, err := decide(ctx, keys[int(i)%len(keys)]); err != nil {
					errs.Add(1)
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if errs.Load() > 0 {
		b.Fatalf("%d errors", errs.Load())
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkRedisMemory: Redis memory per key (INFO memory used_memory, over many keys) for a
// 1000/min limit. Counters and buckets: 10k keys, a few decisions each. Logs: 200 keys filled
// to the limit (the naive log records every call; 1000 calls fill it).
func BenchmarkRedisMemory(b *testing.B) {
	c := redisClient(b)
	ctx := context.Background()
	algs := []sluice.Algorithm{sluice.AlgorithmGCRA, sluice.AlgorithmTokenBucket, sluice.AlgorithmLeakyBucket,
		sluice.AlgorithmFixedWindow, sluice.AlgorithmSlidingWindow, sluice.AlgorithmSlidingLog}
	prefix := fmt.Sprintf("bench:mem:%d:", time.Now().UnixNano())
	b.Cleanup(func() { unlinkPrefix(c, prefix) })
	for _, ct := range redisContenders(b, c, prefix, 1000, time.Minute, algs) {
		b.Run(ct.name, func(b *testing.B) {
			nkeys, calls := 10_000, 3
			if strings.Contains(ct.name, "log") || strings.Contains(ct.name, "naive") {
				nkeys, calls = 200, 1000
			}
			before := usedMemory(b, c)
			var wg sync.WaitGroup
			work := make(chan int, 1024)
			for w := 0; w < 64; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						if _, err := ct.decide(ctx, keys[i%nkeys]); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			for i := 0; i < nkeys*calls; i++ {
				work <- i
			}
			close(work)
			wg.Wait()
			after := usedMemory(b, c)
			b.ReportMetric(float64(after-before)/float64(nkeys), "used_memory-bytes/key")
			b.ReportMetric(sampledUsage(b, c, ct.pattern), "MEMORY_USAGE-bytes/key")
			b.ReportMetric(0, "ns/op")
		})
		ct.close()
	}
}

// plainBucketLua is the anchor: a plain token bucket on a hash, HMGET/HSET/PEXPIRE,
// client time, no exactness.
const plainBucketLua = `
local v = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local rate = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local tokens = tonumber(v[1]) or cap
local ts = tonumber(v[2]) or now
tokens = math.min(cap, tokens + (now - ts) * rate)
local allowed = 0
if tokens >= n then tokens = tokens - n; allowed = 1 end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(cap / rate))
return {allowed, tokens}
`

// cpuWorkers are the goroutine counts BenchmarkRedisCPU decides from
// (SLUICE_BENCH_CPU_WORKERS, comma-separated; default 4 and 64): 4 steals little CPU from
// the server it measures (as redis-benchmark -c 4) and seldom batches; 64 batches.
var cpuWorkers = envCounts("SLUICE_BENCH_CPU_WORKERS", 4, 64)

// envCounts returns the positive integers listed, comma-separated, in the environment
// variable name, or def when it lists none.
func envCounts(name string, def ...int) []int {
	var out []int
	for _, f := range strings.Split(os.Getenv(name), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = def
	}
	return out
}

// BenchmarkRedisCPU: Redis server CPU per decision (INFO commandstats: the usec of the script
// calls, EVALSHA and EVAL, after CONFIG RESETSTAT, over the decisions made), for each
// algorithm with the server clock (TIME) and with the client's clock, from 4 and from 64
// goroutines, with anchors: a script that returns 1, the plain HMGET/HSET/PEXPIRE token
// bucket, and INCR (one call per decision). 1,000 keys, a limit high enough that
// every decision is admitted. The store sends concurrent decisions of one algorithm as one
// batched script call, so one call may decide many keys: redis-µs/decision is the total
// script usec over the decisions, decisions/call how many one call decided on average.
// bench/redis_cpu.sh runs it next to redis-benchmark.
func BenchmarkRedisCPU(b *testing.B) {
	c := redisClient(b)
	ctx := context.Background()
	prefix := fmt.Sprintf("bench:cpu:%d:", time.Now().UnixNano())
	b.Cleanup(func() { unlinkPrefix(c, prefix) })
	algs := []sluice.Algorithm{sluice.AlgorithmGCRA, sluice.AlgorithmTokenBucket, sluice.AlgorithmLeakyBucket,
		sluice.AlgorithmFixedWindow, sluice.AlgorithmSlidingWindow, sluice.AlgorithmSlidingLog}
	type contender struct {
		name   string
		decide func(ctx context.Context, key string) (bool, error)
		store  *redis.Store
	}
	var cts []contender
	for _, a := range algs {
		for _, clock := range []string{"server", "client"} {
			s := cpuStore(b, c, prefix, a, clock)
			l := sluice.New(s)
			rule := sluice.Rule{Algorithm: a, Limit: perSecond, Period: time.Second}
			cts = append(cts, contender{name: "sluice/" + a.String() + "/" + clock + "_clock", store: s,
				decide: func(ctx context.Context, key string) (bool, error) {
					d, err := l.Allow(ctx, key, rule)
					return d.Allowed, err
				}})
		}
	}
	ret1 := goredis.NewScript("return 1")
	plain := goredis.NewScript(plainBucketLua)
	cts = append(cts,
		contender{name: "baseline/return_1", decide: func(ctx context.Context, key string) (bool, error) {
			return true, ret1.Run(ctx, c, []string{prefix + key}).Err()
		}},
		contender{name: "baseline/plain_hmget_hset_pexpire", decide: func(ctx context.Context, key string) (bool, error) {
			return true, plain.Run(ctx, c, []string{prefix + "plain:" + key}, perSecond, perSecond, time.Now().UnixMilli(), 1).Err()
		}},
		contender{name: "baseline/incr", decide: func(ctx context.Context, key string) (bool, error) {
			return true, c.Incr(ctx, prefix+"incr:"+key).Err()
		}})
	for _, g := range cpuWorkers {
		for _, ct := range cts {
			b.Run(fmt.Sprintf("goroutines=%d/%s", g, ct.name), func(b *testing.B) {
				const n = 20_000
				for i := 0; i < 100; i++ { // load the script, create the keys
					_, _ = ct.decide(ctx, keys[i%1000])
				}
				if err := c.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				for w := 0; w < g; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						for i := w; i < n; i += g {
							_, _ = ct.decide(ctx, keys[i%1000])
						}
					}(w)
				}
				wg.Wait()
				calls, usec := commandStats(b, c)
				b.ReportMetric(usec/n, "redis-µs/decision")
				b.ReportMetric(float64(n)/float64(calls), "decisions/call")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// sampledUsage averages MEMORY USAGE (all samples) over up to 100 keys matching pattern.
func sampledUsage(b *testing.B, c *goredis.Client, pattern string) float64 {
	ctx := context.Background()
	var total, n int64
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) && n < 100 {
		v, err := c.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			b.Fatal(err)
		}
		total += v
		n++
	}
	if n == 0 {
		b.Fatalf("no key matches %s", pattern)
	}
	return float64(total) / float64(n)
}

func usedMemory(b *testing.B, c *goredis.Client) int64 {
	runtime.GC()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}

// commandStats sums calls and usec of the commands that made decisions (scripts, INCR).
func commandStats(b *testing.B, c *goredis.Client) (calls int64, usec float64) {
	info := redisInfo(b, c, "commandstats")
	for _, name := range []string{"evalsha", "eval", "incr"} {
		calls += int64(info["calls:"+name])
		usec += info["usec:"+name]
	}
	if calls == 0 {
		b.Fatal("no script calls in INFO commandstats")
	}
	return calls, usec
}

func unlinkPrefix(c *goredis.Client, prefix string) {
	ctx := context.Background()
	for _, pattern := range []string{prefix + "*", "rate:" + prefix + "*"} {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 1000 {
				c.Unlink(ctx, batch...)
				batch = batch[:0]
			}
		}
		if len(batch) > 0 {
			c.Unlink(ctx, batch...)
		}
	}
}

// cpuStore returns a store of the CPU benchmarks for algorithm a with the "server" or "client"
// clock, its keys under its own prefix; it is closed when the benchmark ends.
func cpuStore(b *testing.B, c goredis.UniversalClient, prefix string, a sluice.Algorithm, clock string) *redis.Store {
	opts := []redis.Option{redis.WithPrefix(prefix + clock + ":" + a.String() + ":")}
	if clock == "client" {
		opts = append(opts, redis.WithClock(sluice.SystemClock{}))
	}
	if clock == "counters" { // the server's clock, the windows kept in counters (no Lua)
		opts = append(opts, redis.WithCounters())
	}
	s, err := redis.New(c, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}
