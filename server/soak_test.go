package server_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestSoak (issue 16, item 11): mixed load through the HTTP API of a server on a Redis of the
// test's own, with the local fallback, while Redis is killed and restarted every period:
// 15 s with a restart every 6 s in CI, 10 minutes with one every 2 minutes under
// SLUICE_CHAOS. Goroutines, live heap and file descriptors end where they started (after a
// warm-up with one outage), every request is answered (200 or 429, the fallback covering the outages), and
// every key Redis holds has a TTL.
func TestSoak(t *testing.T) {
	testenv.Timing(t)
	run, every := 15*time.Second, 6*time.Second
	if testenv.Chaos() {
		run, every = 10*time.Minute, 2*time.Minute
	}
	srv := testenv.StartRedis(t)
	cfg := redisConfig(t, "redis://"+srv.Addr())
	cfg.StoreConfig.Fallback = "local"
	cfg.StoreConfig.Timeout = 50 * time.Millisecond
	h := (&harness{}).run(t, cfg)
	base := "http://" + h.srv.HTTPAddr()
	client := &http.Client{Timeout: 5 * time.Second}
	var answered, failed atomic.Int64
	load := func(d time.Duration) {
		var wg sync.WaitGroup
		stop := time.Now().Add(d)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					algo := []string{"fixed_window", "token_bucket", "sliding_window", "gcra", "sliding_log"}[rand.IntN(5)]
					body := fmt.Sprintf(`{"key":"soak:%s:%d","rule":{"algorithm":%q,"limit":50,"period":"2s"}}`, algo, rand.IntN(200), algo)
					resp, err := client.Post(base+"/v1/allow", "application/json", strings.NewReader(body))
					if err != nil {
						failed.Add(1)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
						failed.Add(1)
					} else {
						answered.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		client.CloseIdleConnections()
	}
	outage := func() {
		srv.Kill()
		time.Sleep(time.Second)
		srv.Start()
	}
	// Warm-up, one outage included: pools, buffers, and the fallback's per-key state for
	// every key of the load (1,000).
	warm := make(chan struct{})
	go func() { load(4 * time.Second); close(warm) }()
	time.Sleep(500 * time.Millisecond)
	outage()
	<-warm
	time.Sleep(500 * time.Millisecond) // the server's side of closed connections
	before := footprint()
	done := make(chan struct{})
	go func() { load(run); close(done) }()
	restarts := 0
	for next := time.Now().Add(every); ; next = next.Add(every) {
		select {
		case <-done:
		case <-time.After(time.Until(next)):
			outage()
			restarts++
			continue
		}
		break
	}
	time.Sleep(500 * time.Millisecond) // the server's side of closed connections
	after := footprint()
	t.Logf("%v of load, %d Redis restarts: %d answered, %d failed; goroutines %d -> %d, live heap %.1f -> %.1f MB, fds %d -> %d",
		run, restarts, answered.Load(), failed.Load(), before.goroutines, after.goroutines, testenv.MiB(before.heap), testenv.MiB(after.heap), before.fds, after.fds)
	if n := failed.Load(); n != 0 {
		t.Errorf("%d requests failed", n)
	}
	if after.goroutines > before.goroutines+5 {
		t.Errorf("goroutines grew from %d to %d", before.goroutines, after.goroutines)
	}
	if after.fds > before.fds+5 {
		t.Errorf("file descriptors grew from %d to %d", before.fds, after.fds)
	}
	if after.heap > before.heap+before.heap/10+1<<20 {
		t.Errorf("live heap grew from %.1f to %.1f MB", testenv.MiB(before.heap), testenv.MiB(after.heap))
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	ctx := context.Background()
	keys := 0
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		keys++
		if ttl := c.PTTL(ctx, iter.Val()).Val(); ttl < 0 && ttl != -2*time.Nanosecond {
			t.Errorf("key %q has no TTL", iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d keys in Redis at the end, every one with a TTL", keys)
}

type usage struct {
	goroutines, fds int
	heap            uint64
}

func footprint() usage {
	fds, _ := os.ReadDir("/proc/self/fd")
	return usage{goroutines: runtime.NumGoroutine(), fds: len(fds), heap: testenv.LiveHeap()}
}
