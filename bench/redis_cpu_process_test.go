package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
)

// BenchmarkRedisCPUProcess measures what a decision costs the Redis process as a whole, the
// figure of issue 26's head-to-head (Redis CPU per request): INFO cpu's used_cpu_user +
// used_cpu_sys delta over the decisions, which counts the event loop, the system calls and
// the reply buffers besides the commands. With it, per decision: the commandstats usec of
// the commands the client sent (scripts, with the commands they call), the commands Redis processed
// (total_commands_processed, nested calls included), the reads it made from the sockets
// (total_reads_processed, one per request or pipeline it woke up for) and the bytes in and
// out; every command seen is logged with its calls per decision, so a second call (TIME, a
// NOSCRIPT fallback, SCRIPT, PING, CLIENT) shows.
//
// Contenders: Sluice's store for the algorithms of the head-to-head (server clock, 10,000
// keys, every decision admitted), the windows kept in counters and decided without Lua
// (redis.WithCounters: TIME, INCRBY, PEXPIRE NX and the sliding window's MGET, pipelined),
// envoyproxy/ratelimit's command pair (INCRBY and EXPIRE in
// one pipeline, as its Redis cache sends them) and INCR alone. Callers: SLUICE_BENCH_CALLERS
// (comma-separated; default 1 and 64): one caller is the idle case, where each decision is
// its own call and its own wake-up of Redis.
//
//	cd bench && SLUICE_REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench RedisCPUProcess -benchtime 1x
func BenchmarkRedisCPUProcess(b *testing.B) {
	c := redisClient(b)
	ctx := context.Background()
	prefix := fmt.Sprintf("bench:cpup:%d:", time.Now().UnixNano())
	b.Cleanup(func() { unlinkPrefix(c, prefix) })
	type contender struct {
		name   string
		decide func(ctx context.Context, key string) error
	}
	var cts []contender
	for _, a := range []sluice.Algorithm{sluice.AlgorithmSlidingWindow, sluice.AlgorithmFixedWindow,
		sluice.AlgorithmGCRA, sluice.AlgorithmTokenBucket} {
		s := cpuStore(b, c, prefix, a, "server")
		l := sluice.New(s)
		rule := sluice.Rule{Algorithm: a, Limit: perSecond, Period: time.Second}
		cts = append(cts, contender{name: "sluice/" + a.String(), decide: func(ctx context.Context, key string) error {
			_, err := l.Allow(ctx, key, rule)
			return err
		}})
		if a == sluice.AlgorithmSlidingWindow || a == sluice.AlgorithmFixedWindow { // issue 34, item 3
			lc := sluice.New(cpuStore(b, c, prefix, a, "counters"))
			cts = append(cts, contender{name: "sluice-counters/" + a.String(), decide: func(ctx context.Context, key string) error {
				_, err := lc.Allow(ctx, key, rule)
				return err
			}})
		}
	}
	cts = append(cts,
		contender{name: "baseline/incrby_expire_pipelined", decide: func(ctx context.Context, key string) error {
			k := prefix + "envoy:" + key
			_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				p.IncrBy(ctx, k, 1)
				p.Expire(ctx, k, time.Second)
				return nil
			})
			return err
		}},
		contender{name: "baseline/time_incrby_pexpirenx_get_pipelined", decide: func(ctx context.Context, key string) error {
			k := prefix + "plain:{" + key + "}:"
			_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
				p.Time(ctx)
				p.IncrBy(ctx, k+"1", 1)
				p.Do(ctx, "pexpire", k+"1", 2000, "nx")
				p.Get(ctx, k+"0")
				return nil
			})
			if err == goredis.Nil {
				err = nil
			}
			return err
		}},
		contender{name: "baseline/incr", decide: func(ctx context.Context, key string) error {
			return c.Incr(ctx, prefix+"incr:"+key).Err()
		}})
	for _, g := range envCounts("SLUICE_BENCH_CALLERS", 1, 64) {
		for _, ct := range cts {
			b.Run(fmt.Sprintf("callers=%d/%s", g, ct.name), func(b *testing.B) {
				n := 5_000 * g
				if n > 40_000 {
					n = 40_000
				}
				for i := 0; i < 200; i++ { // load the script, open the connections
					_ = ct.decide(ctx, keys[i])
				}
				if err := c.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				before := redisInfo(b, c, "cpu", "stats", "commandstats")
				var wg sync.WaitGroup
				var errs sync.Map
				for w := 0; w < g; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						for i := w; i < n; i += g {
							if err := ct.decide(ctx, keys[(i*7919)%len(keys)]); err != nil {
								errs.Store(err.Error(), true)
							}
						}
					}(w)
				}
				wg.Wait()
				after := redisInfo(b, c, "cpu", "stats", "commandstats")
				errs.Range(func(k, _ any) bool { b.Errorf("decision failed: %v", k); return true })
				per := func(field string) float64 { return (after[field] - before[field]) / float64(n) }
				cpu := (after["used_cpu_user"] + after["used_cpu_sys"] - before["used_cpu_user"] - before["used_cpu_sys"]) * 1e6
				b.ReportMetric(cpu/float64(n), "redis-cpu-µs/decision")
				// The INFO reading the stats is one command and one read: not the decisions'. The
				// usec of a script includes the commands it calls (listed in the log).
				var usec, scripts float64
				var seen []string
				for k, v := range after {
					name, ok := strings.CutPrefix(k, "usec:")
					if !ok || name == "info" || name == "config|resetstat" {
						continue
					}
					calls := after["calls:"+name]
					switch name {
					case "evalsha", "eval":
						scripts += calls
						usec += v
					case "incr", "incrby", "expire", "pexpire", "get", "time":
						usec += v
					}
					seen = append(seen, fmt.Sprintf("%s %.3f calls (%.2f µs)", name, calls/float64(n), v/calls))
				}
				sort.Strings(seen)
				b.Logf("per decision: %s", strings.Join(seen, ", "))
				b.ReportMetric(usec/float64(n), "cmd-µs/decision")
				b.ReportMetric((after["total_commands_processed"]-before["total_commands_processed"]-1)/float64(n), "cmds/decision")
				b.ReportMetric((after["total_reads_processed"]-before["total_reads_processed"]-1)/float64(n), "reads/decision")
				b.ReportMetric(per("total_net_input_bytes"), "in-B/decision")
				b.ReportMetric(per("total_net_output_bytes"), "out-B/decision")
				if scripts > 0 {
					b.ReportMetric(float64(n)/scripts, "decisions/call")
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// redisInfo reads the INFO sections named in one command: the numeric fields by name, and
// each command's calls and usec as "calls:NAME" and "usec:NAME".
func redisInfo(b *testing.B, c *goredis.Client, sections ...string) map[string]float64 {
	info, err := c.Info(context.Background(), sections...).Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if name, ok := strings.CutPrefix(k, "cmdstat_"); ok {
			for _, f := range strings.Split(v, ",") {
				fk, fv, _ := strings.Cut(f, "=")
				if fk == "calls" || fk == "usec" {
					x, _ := strconv.ParseFloat(fv, 64)
					out[fk+":"+name] = x
				}
			}
			continue
		}
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			out[k] = x
		}
	}
	return out
}
