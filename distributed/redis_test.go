package distributed

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/redis"
)

// These tests run against redis-servers they start themselves (SLUICE_REDIS_SERVER_BIN, set
// by scripts/test.sh), on free 127.0.0.1 ports, and signal only those.

func newRedisStore(t *testing.T, addr string, opts ...redis.Option) *redis.Store {
	t.Helper()
	client := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	s, err := redis.New(client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); client.Close() })
	return s
}

// evalCalls reads the script calls the server has executed (INFO commandstats).
func evalCalls(t *testing.T, addr string) int64 {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
				n, _ := strconv.ParseInt(calls, 10, 64)
				total += n
			}
		}
	}
	return total
}

func TestOverLimitFloodRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	for _, rule := range []sluice.Rule{sluice.FixedWindow(5, time.Second), sluice.TokenBucket(5, time.Second, 5),
		sluice.SlidingWindow(5, time.Second, 4), sluice.GCRA(5, time.Second, 0)} {
		t.Run(rule.String(), func(t *testing.T) {
			clock := sluicetest.NewManualClock(t0)
			s := newRedisStore(t, srv.Addr(), redis.WithClock(clock), redis.WithPrefix(t.Name()+":"))
			o, err := NewOverLimit(s, WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			checkOverLimitFlood(t, o, clock, rule, func() int64 { return evalCalls(t, srv.Addr()) })
		})
	}
}

// Three Async instances, each with its own client, share a key on Redis at a known rate in
// real time; every window stays within the documented bound.
func TestAsyncOverAdmissionRedis(t *testing.T) {
	testenv.Timing(t)
	srv := testenv.StartRedis(t)
	const nodes, rate = 3, 400 // units per second offered to each node
	for _, interval := range []time.Duration{50 * time.Millisecond, 500 * time.Millisecond} {
		t.Run(interval.String(), func(t *testing.T) {
			rule := sluice.FixedWindow(400, time.Second)
			key := "async:" + interval.String()
			var (
				mu     sync.Mutex
				admits []time.Duration
				wg     sync.WaitGroup
				start  = time.Now().Truncate(time.Second).Add(time.Second)
				stop   = start.Add(2500 * time.Millisecond)
			)
			for range nodes {
				a := newAsync(t, newRedisStore(t, srv.Addr()), WithInterval(interval))
				wg.Add(1)
				go func() {
					defer wg.Done()
					tick := time.NewTicker(time.Second / rate) // drops ticks when late: no catch-up bursts
					defer tick.Stop()
					time.Sleep(time.Until(start))
					for now := range tick.C {
						if now.After(stop) {
							return
						}
						d, err := a.Take(context.Background(), sluice.Request{Key: key, Rule: rule, N: 1})
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							mu.Lock()
							admits = append(admits, time.Duration(sluice.SystemClock{}.Now().UnixNano()))
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			over := worstExcess(admits, rule)
			bound := boundFor(rule, interval, nodes, rate)
			t.Logf("interval %v: worst window admitted %d over the limit %d; bound %d", interval, over, rule.Limit, bound)
			if over > bound {
				t.Fatalf("over-admission %d > bound %d", over, bound)
			}
		})
	}
}

func TestFallbackOutageRedis(t *testing.T) {
	for _, mode := range []string{"kill", "sigstop"} {
		t.Run(mode, func(t *testing.T) {
			srv := testenv.StartRedis(t)
			stores := make([]*redis.Store, 3)
			for i := range stores {
				stores[i] = newRedisStore(t, srv.Addr(), redis.WithTimeout(time.Second))
			}
			var repairedAt atomic.Int64
			env := outageEnv{
				store: func(i int) sluice.Store { return stores[i] },
				breakIt: func(t *testing.T) {
					if mode == "kill" {
						srv.Kill()
					} else {
						srv.Signal(syscall.SIGSTOP)
					}
				},
				repair: func(t *testing.T) {
					if mode == "kill" {
						srv.Start()
					} else {
						srv.Signal(syscall.SIGCONT)
					}
					repairedAt.Store(time.Now().UnixNano())
				},
			}
			runOutage(t, env, 50*time.Millisecond)
		})
	}
}

