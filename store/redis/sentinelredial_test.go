package redis_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/redis"
)

// TestSentinelKillResumes: behind Sentinel (a setup of the test's own, down-after 1 s), the
// primary is SIGKILLed while four callers decide once a millisecond on a pool of 4, so the
// pool soon stops dialing for callers and re-dials in the background. The first decision
// that succeeds comes within 300 ms of the first Sentinel naming the new primary (polled
// every 5 ms): the redialer asks the Sentinels every RedialInterval. With go-redis's pool
// alone, which re-dials once a second, it came up to a second after the announcement (a CI
// run of TestServeSentinelFailover: 0.87 s).
func TestSentinelKillResumes(t *testing.T) {
	testenv.Timing(t)
	setup := testenv.StartSentinel(t, time.Second, 3*time.Second)
	s, err := redis.NewFromURL(setup.URL() + "?pool_size=4")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := sluice.Request{Key: "sentinel-kill", Rule: sluice.GCRA(1_000_000, time.Second, 0), N: 1}
	if _, err := s.Take(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		killed   time.Time
		answered time.Time // the first success of a decision sent after the kill
		failures int
		wrong    error
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	everyMillisecond(4, stop, &wg, func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := s.Take(ctx, req)
		cancel()
		end := time.Now()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil && !errors.Is(err, sluice.ErrStoreUnavailable) && !errors.Is(err, context.DeadlineExceeded):
			wrong = err
		case err != nil:
			failures++
		case !killed.IsZero() && start.After(killed) && answered.IsZero():
			answered = end
		}
	})
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(200 * time.Millisecond)

	primary := setup.Primary()
	if primary == nil {
		t.Fatal("the Sentinels name none of the setup's servers as the primary")
	}
	from := primary.Addr()
	mu.Lock()
	primary.Kill()
	killed = time.Now()
	mu.Unlock()

	_, promoted := setup.Announced(from, killed)
	if promoted.IsZero() {
		t.Fatal("no new primary announced within 20 s of the kill")
	}
	waitUntil := promoted.Add(3 * time.Second)
	for time.Now().Before(waitUntil) {
		mu.Lock()
		done := !answered.IsZero()
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if wrong != nil {
		t.Errorf("a failure other than ErrStoreUnavailable or the caller's deadline: %v", wrong)
	}
	if answered.IsZero() {
		t.Fatalf("no decision within 3 s of the announcement (%d failures)", failures)
	}
	t.Logf("primary %s killed; new primary announced after %v; first decision %v after the announcement (%v after the kill); %d failed",
		from, promoted.Sub(killed), answered.Sub(promoted), answered.Sub(killed), failures)
	if d := answered.Sub(promoted); d > 300*time.Millisecond {
		t.Errorf("first decision %v after the new primary was announced, want <= 300 ms", d)
	}
}
