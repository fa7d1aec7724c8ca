package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/redis"
)

// BenchmarkRedisClientCPU measures what a decision on Redis costs the client process and the
// server, at 64 and at 1 goroutines deciding over 10,000 keys (each goroutine picks keys at
// random), for GCRA and the sliding window:
//
//   - cpu-µs/op: the benchmark process's CPU time (getrusage RUSAGE_SELF, user + system)
//     over the decisions: the store path's client cost, plus the loop's (the same for all);
//   - redis-µs/op: the server's CPU (INFO cpu, used_cpu_user + used_cpu_sys) over the
//     decisions;
//   - decisions/call: decisions over script calls (INFO commandstats, EVALSHA + EVAL).
//
// Contenders: store (store/redis as built from this tree, default options), store/inflight=N
// (WithMaxInFlight(N): fewer, fuller pipelines), and rueidis (github.com/redis/rueidis with
// its auto-pipelining, sending the very EVALSHA the store sends for one decision, captured by
// a hook: one script call per decision, no batched script). bench/redis_client_cpu.sh runs
// it on two commits, interleaved, and summarises:
//
//	cd bench && SLUICE_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench 'RedisClientCPU' -benchtime 20000x
func BenchmarkRedisClientCPU(b *testing.B) {
	c := redisClient(b)
	prefix := fmt.Sprintf("bench:ccpu:%d:", time.Now().UnixNano())
	b.Cleanup(func() { unlinkPrefix(c, prefix) })
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{c.Options().Addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rc.Close)
	only := os.Getenv("SLUICE_BENCH_CONTENDERS") // comma-separated prefixes of names; "": all
	for _, a := range []sluice.Algorithm{sluice.AlgorithmGCRA, sluice.AlgorithmSlidingWindow} {
		rule := sluice.Rule{Algorithm: a, Limit: perSecond, Period: time.Second}
		type contender struct {
			name   string
			decide func(ctx context.Context, key string) error
		}
		var cs []contender
		for _, inflight := range []int{0, 1, 2, 8} {
			name, opts := "store", []redis.Option{redis.WithPrefix(prefix + a.String() + ":")}
			if inflight > 0 {
				name = fmt.Sprintf("store/inflight=%d", inflight)
				opts = append(opts, redis.WithMaxInFlight(inflight))
			}
			s, err := redis.New(c, opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			cs = append(cs, contender{name: name, decide: func(ctx context.Context, key string) error {
				_, err := s.Take(ctx, sluice.Request{Key: key, Rule: rule, N: 1})
				return err
			}})
		}
		cs = append(cs, contender{name: "rueidis", decide: rueidisDecider(b, c, rc, prefix+"rueidis:"+a.String()+":", rule)})
		for _, ct := range cs {
			for _, g := range []int{64, 1} {
				name := fmt.Sprintf("%s/%s/g%d", ct.name, a, g)
				if only != "" && !hasPrefix(name, strings.Split(only, ",")) {
					continue
				}
				b.Run(name, func(b *testing.B) {
					runClientCPU(b, c, g, ct.decide)
				})
			}
		}
	}
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// runClientCPU makes b.N decisions from g goroutines over 10,000 keys and reports the client's
// and the server's CPU per decision and the decisions per script call.
func runClientCPU(b *testing.B, c *goredis.Client, g int, decide func(ctx context.Context, key string) error) {
	ctx := context.Background()
	var failed atomic.Int64 // decisions that failed (a timeout on a loaded machine)
	run := func(n int) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < g; w++ {
			wg.Add(1)
			go func(w uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(w, uint64(n)))
				for next.Add(1) <= int64(n) {
					if err := decide(ctx, keys[rng.IntN(len(keys))]); err != nil && failed.Add(1) == 1 {
						b.Log(err)
					}
				}
			}(uint64(w))
		}
		wg.Wait()
	}
	run(2000) // connections, scripts loaded, most keys created
	failed.Store(0)
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	server0 := redisCPU(b, c)
	client0 := processCPU()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	client := processCPU() - client0
	server := time.Duration((redisCPU(b, c) - server0) * float64(time.Second)) // INFO cpu, overlimit_hot_test.go
	calls, _ := commandStats(b, c)
	b.ReportMetric(float64(client.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(server.Microseconds())/float64(b.N), "redis-µs/op")
	b.ReportMetric(float64(b.N)/float64(calls), "decisions/call")
	if f := failed.Load(); f*100 > int64(b.N) {
		b.Errorf("%d of %d decisions failed", f, b.N)
	}
}

// rueidisDecider returns a decision through rueidis: the single-key EVALSHA the store sends
// for rule (captured from a store on c; the server clock, so it is valid for any key at any
// time) with the key replaced, sent with rueidis's auto-pipelining. A prototype for the
// comparison: a reply is read for its first double (allowed) only.
func rueidisDecider(b *testing.B, c *goredis.Client, rc rueidis.Client, prefix string, rule sluice.Rule) func(ctx context.Context, key string) error {
	hook := &captureHook{}
	cc := goredis.NewClient(c.Options())
	defer cc.Close()
	cc.AddHook(hook)
	s, err := redis.New(cc, redis.WithPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Take(context.Background(), sluice.Request{Key: "k", Rule: rule, N: 1}); err != nil {
		b.Fatal(err)
	}
	_ = s.Close()
	hook.mu.Lock()
	captured := hook.args
	hook.mu.Unlock()
	if captured == nil {
		b.Fatal("no EVALSHA captured")
	}
	sha := captured[1].(string)
	var argv []string
	for _, a := range captured[4:] {
		switch a := a.(type) {
		case string:
			argv = append(argv, a)
		case []byte:
			argv = append(argv, string(a))
		default:
			argv = append(argv, fmt.Sprint(a))
		}
	}
	return func(ctx context.Context, key string) error {
		cmd := rc.B().Evalsha().Sha1(sha).Numkeys(1).Key(s.Key(key)).Arg(argv...).Build()
		reply, err := rc.Do(ctx, cmd).ToString()
		if err != nil {
			return err
		}
		if len(reply) < 8 {
			return fmt.Errorf("rueidis: reply of %d bytes", len(reply))
		}
		if allowed := math.Float64frombits(binary.LittleEndian.Uint64([]byte(reply[:8]))); allowed != 1 {
			return fmt.Errorf("rueidis: denied under a limit of %d", rule.Limit)
		}
		return nil
	}
}
