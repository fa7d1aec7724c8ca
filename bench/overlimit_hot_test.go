package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/sluicetest"
)

// BenchmarkOverlimitHotKey is issue 26's hot over-limit key: 64 goroutines decide one key,
// ten times or more over its sliding-window limit, through distributed.OverLimit on the Redis
// store at SLUICE_REDIS_ADDR (skipped when unset). Each goroutine is a caller in a closed loop
// that thinks 1 ms between requests (about 30,000 requests/s in all, as the service's 64
// callers send), so that the store's round trip, not the cached denial's speed, sets how many
// requests arrive while a call is out. The key is first brought to the steady state of a flood
// (its previous window full), where a denial is cached only until the next unit slides out:
// RetryAfter = period / limit, 1 ms at limit=1000, 10 ms at limit=100. What reaches Redis then
// is what the benchmark measures. redis-µs/req is the INFO commandstats usec of EVALSHA and
// EVAL (the scripts' own time), delta over the run, per request; redis-cpu-µs/req the INFO cpu
// (used_cpu_user + used_cpu_sys) delta per request, the whole server process with command
// parsing and networking (other clients of the same Redis count too: use a private one);
// store-calls/req the Take calls that went past the cache, per request; allowed/s the
// admitted requests per second (at most the limit).
//
//	cd bench && SLUICE_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench OverlimitHotKey -benchtime 64000x -count 3
func BenchmarkOverlimitHotKey(b *testing.B) {
	c := redisClient(b)
	prefix := fmt.Sprintf("bench:hot:%d:", time.Now().UnixNano())
	b.Cleanup(func() { unlinkPrefix(c, prefix) })
	for _, limit := range []int64{1000, 100} {
		b.Run("sliding_window/limit="+strconv.FormatInt(limit, 10), func(b *testing.B) {
			rule := sluice.SlidingWindow(limit, time.Second, 1)
			benchHotKey(b, c, prefix+strconv.FormatInt(limit, 10)+":", rule, 64, time.Millisecond, "server")
		})
	}
	// The same on the windows kept in counters, decided without Lua (redis.WithCounters;
	// issue 34): no script, so redis-µs/req is 0 and redis-cpu-µs/req is the measure.
	for _, limit := range []int64{1000, 100} {
		b.Run("counters/sliding_window/limit="+strconv.FormatInt(limit, 10), func(b *testing.B) {
			rule := sluice.SlidingWindow(limit, time.Second, 1)
			benchHotKey(b, c, prefix+"c"+strconv.FormatInt(limit, 10)+":", rule, 64, time.Millisecond, "counters")
		})
	}
}

// benchHotKey floods one key under rule from goroutines callers, each thinking think between
// requests, after a warm-up that fills the key's previous window, on the store cpuStore
// builds for store ("server": the scripts; "counters").
func benchHotKey(b *testing.B, c *goredis.Client, prefix string, rule sluice.Rule, goroutines int, think time.Duration, store string) {
	ctx := context.Background()
	s := cpuStore(b, c, prefix, rule.Algorithm, store)
	cs := &sluicetest.CountingStore{Store: s}
	o, err := distributed.NewOverLimit(cs)
	if err != nil {
		b.Fatal(err)
	}
	req := sluice.Request{Key: "hot", Rule: rule, N: 1}
	for range rule.Limit + 1 { // fill the window
		if _, err := o.Take(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	// From the next window on, the full one slides out a unit every period/limit.
	time.Sleep(time.Until(time.Now().Truncate(rule.Period).Add(rule.Period + rule.Period/20)))
	_, usec0 := commandStats(b, c)
	cpu0 := redisCPU(b, c)
	calls0 := cs.Calls()
	var mu sync.Mutex
	var allowed, failed int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var ok, bad int64
			for i := g; i < b.N; i += goroutines {
				d, err := o.Take(ctx, req)
				switch {
				case err != nil:
					bad++
				case d.Allowed:
					ok++
				}
				time.Sleep(think)
			}
			mu.Lock()
			allowed, failed = allowed+ok, failed+bad
			mu.Unlock()
		}(g)
	}
	wg.Wait()
	b.StopTimer()
	_, usec1 := commandStats(b, c)
	cpu1 := redisCPU(b, c)
	if failed > 0 {
		b.Errorf("%d of %d requests failed", failed, b.N)
	}
	n := float64(b.N)
	b.ReportMetric((usec1-usec0)/n, "redis-µs/req")
	b.ReportMetric((cpu1-cpu0)*1e6/n, "redis-cpu-µs/req")
	b.ReportMetric(float64(cs.Calls()-calls0)/n, "store-calls/req")
	b.ReportMetric(float64(allowed)/b.Elapsed().Seconds(), "allowed/s")
}

// redisCPU returns the Redis server's used_cpu_user + used_cpu_sys, in seconds.
func redisCPU(b *testing.B, c *goredis.Client) float64 {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		name, v, _ := strings.Cut(line, ":")
		if name == "used_cpu_user" || name == "used_cpu_sys" {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %s: %v", line, err)
			}
			total += x
		}
	}
	return total
}
