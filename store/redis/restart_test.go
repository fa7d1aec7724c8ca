package redis_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/redis"
)

// resumeMargin is the round trip of the first decision on a restarted Redis (a dial, the
// connection's handshake, EVALSHA, NOSCRIPT and EVAL) on a loaded CI box under -race, and the
// caller's next tick (1 ms).
const resumeMargin = 50 * time.Millisecond

// TestRestartResumes: a single Redis (NewFromURL, no fallback) is SIGKILLed while four
// callers decide, each once a millisecond, and restarted on its port 1-2 s later, five times.
// The first decision that succeeds is answered within RedialInterval plus its round trip
// (resumeMargin) of the restarted server accepting a connection. With go-redis's pool alone,
// which after PoolSize failed dials (4 here, so that the test need not wait for 20) answers
// its last dial error and re-dials once a second, it came up to a second later.
func TestRestartResumes(t *testing.T) {
	testenv.Timing(t)
	srv := testenv.StartRedis(t)
	s, err := redis.NewFromURL("redis://" + srv.Addr() + "?pool_size=4")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := sluice.Request{Key: "restart", Rule: sluice.GCRA(1_000_000, time.Second, 0), N: 1}
	var (
		failures atomic.Int64 // failed decisions in all
		wrong    atomic.Value // an error that is not ErrStoreUnavailable
		mu       sync.Mutex
		armed    time.Time // a decision sent after it can only succeed on the restarted server
		answered time.Time // when the first of those that succeeded was answered
		took     time.Duration
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	everyMillisecond(4, stop, &wg, func() {
		start := time.Now()
		_, err := s.Take(context.Background(), req)
		end := time.Now()
		if err != nil {
			if !errors.Is(err, sluice.ErrStoreUnavailable) {
				wrong.Store(err)
			}
			failures.Add(1)
			return
		}
		mu.Lock()
		if !armed.IsZero() && start.After(armed) && answered.IsZero() {
			answered, took = end, end.Sub(start)
		}
		mu.Unlock()
	})
	defer func() { close(stop); wg.Wait() }()

	const restarts = 5
	bound := redis.RedialInterval + resumeMargin
	var worst, slowest time.Duration
	for i := range restarts {
		if _, err := s.Take(context.Background(), req); err != nil {
			t.Fatalf("before restart %d: %v", i+1, err)
		}
		srv.Kill()
		mu.Lock()
		armed, answered = time.Now(), time.Time{}
		mu.Unlock()
		failed := failures.Load()
		waitUntil(t, "a failed decision", func() bool { return failures.Load() > failed })
		// Down long enough for the pool to stop dialing (PoolSize failed dials), for a time
		// that falls anywhere in go-redis's one-second re-dial cycle.
		time.Sleep(time.Second + rand.N(time.Second))
		accepted := srv.Start()
		before := failures.Load()
		waitUntil(t, "a decision on the restarted Redis", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return !answered.IsZero()
		})
		mu.Lock()
		resumed, d := max(0, answered.Sub(accepted)), took
		armed = time.Time{}
		mu.Unlock()
		worst, slowest = max(worst, resumed), max(slowest, d)
		t.Logf("restart %d: the first decision that succeeded was answered %v after Redis accepted a connection (it took %v); %d failed in between",
			i+1, resumed.Round(100*time.Microsecond), d.Round(100*time.Microsecond), failures.Load()-before)
		if resumed > bound {
			t.Errorf("restart %d: the first decision that succeeded was answered %v after Redis accepted a connection, want within %v (RedialInterval %v + %v)",
				i+1, resumed, bound, redis.RedialInterval, resumeMargin)
		}
	}
	if err, _ := wrong.Load().(error); err != nil {
		t.Errorf("a decision while Redis was down failed with %v, want ErrStoreUnavailable", err)
	}
	t.Logf("%d restarts: back within %v (bound %v); the first decision took at most %v",
		restarts, worst.Round(100*time.Microsecond), bound, slowest.Round(100*time.Microsecond))
}

// waitUntil polls cond every millisecond for at most 3 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 3s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// everyMillisecond starts n callers (in wg) that each call decide once a millisecond, a late
// call dropping ticks, until stop is closed.
func everyMillisecond(n int, stop <-chan struct{}, wg *sync.WaitGroup, decide func()) {
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				decide()
			}
		}()
	}
}
