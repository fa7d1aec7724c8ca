package memcached_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memcached"
)

// TestServerKilled: with two servers, keys spread over both; once the test's own server is
// killed, the keys it held fail with ErrStoreUnavailable within the timeout, the others
// still decide, and no goroutine is left behind.
func TestServerKilled(t *testing.T) {
	testenv.Timing(t)
	own := testenv.StartMemcached(t)
	const timeout = 100 * time.Millisecond
	s := newStore(t, []string{server(t), own.Addr()}, memcached.WithTimeout(timeout))
	ctx := context.Background()
	rules := []sluice.Rule{sluice.FixedWindow(100, time.Minute), sluice.PerMinute(100), sluice.TokenBucket(100, time.Minute, 0)}
	take := func(i int) (time.Duration, error) {
		start := time.Now()
		_, err := s.Take(ctx, sluice.Request{Key: fmt.Sprintf("key-%d", i), Rule: rules[i%len(rules)], N: 1})
		return time.Since(start), err
	}
	const keys = 60
	for i := range keys {
		if _, err := take(i); err != nil {
			t.Fatalf("key %d before the kill: %v", i, err)
		}
	}
	before := runtime.NumGoroutine()
	own.Kill()
	failed := map[int]bool{}
	for i := range keys {
		took, err := take(i)
		if err != nil {
			if !errors.Is(err, sluice.ErrStoreUnavailable) {
				t.Errorf("key %d: %v, want ErrStoreUnavailable", i, err)
			}
			failed[i] = true
		}
		if took > timeout+50*time.Millisecond {
			t.Errorf("key %d: %v, longer than the timeout %v", i, took, timeout)
		}
	}
	if len(failed) == 0 || len(failed) == keys {
		t.Fatalf("%d of %d keys failed after one of two servers was killed: want some", len(failed), keys)
	}
	// The same keys fail again, and only they.
	for i := range keys {
		if _, err := take(i); (err != nil) != failed[i] {
			t.Errorf("key %d: error %v, failed before: %v", i, err, failed[i])
		}
	}
	time.Sleep(50 * time.Millisecond) // let closed connections' goroutines, if any, end
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines after the failures, %d before", after, before)
	}
	t.Logf("%d of %d keys on the killed server", len(failed), keys)
}

// TestSlowServer: a server that accepts connections and never answers fails decisions with
// ErrStoreUnavailable within the timeout, callers queued behind the stuck round included.
func TestSlowServer(t *testing.T) {
	testenv.Timing(t)
	addr := silentServer(t)
	const timeout = 100 * time.Millisecond
	s := newStore(t, []string{addr}, memcached.WithTimeout(timeout))
	for _, r := range []sluice.Rule{sluice.FixedWindow(10, time.Second), sluice.GCRA(10, time.Second, 0)} {
		errs := make(chan error, 8)
		start := time.Now()
		for range 8 {
			go func() {
				_, err := s.Take(context.Background(), sluice.Request{Key: "k", Rule: r, N: 1})
				errs <- err
			}()
		}
		for range 8 {
			if err := <-errs; !errors.Is(err, sluice.ErrStoreUnavailable) {
				t.Errorf("%s: %v, want ErrStoreUnavailable", r, err)
			}
		}
		// Each caller waits for at most the round ahead of its own and its own.
		if took := time.Since(start); took > 8*timeout+100*time.Millisecond {
			t.Errorf("%s: 8 callers took %v with a timeout of %v", r, took, timeout)
		}
	}
}

// TestQueuedCallerContext: a caller queued behind a stuck round gives up when its context
// ends.
func TestQueuedCallerContext(t *testing.T) {
	testenv.Timing(t)
	addr := silentServer(t)
	s := newStore(t, []string{addr}, memcached.WithTimeout(time.Second))
	r := sluice.GCRA(10, time.Second, 0)
	go func() { _, _ = s.Take(context.Background(), sluice.Request{Key: "k", Rule: r, N: 1}) }()
	time.Sleep(20 * time.Millisecond) // the first caller's round is under way
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.Take(ctx, sluice.Request{Key: "k", Rule: r, N: 1}); !errors.Is(err, sluice.ErrStoreUnavailable) {
		t.Fatalf("%v, want ErrStoreUnavailable", err)
	}
	if took := time.Since(start); took > 150*time.Millisecond {
		t.Errorf("queued caller with a 50 ms context took %v", took)
	}
}

// TestBadInputBeforeNetwork: invalid rules and keys are refused with a *sluice.FieldError
// before any round trip, even with no server to reach.
func TestBadInputBeforeNetwork(t *testing.T) {
	s, err := memcached.NewFromServers([]string{"127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	good := sluice.TokenBucket(10, time.Second, 0)
	for _, req := range []sluice.Request{
		{Key: "", Rule: good, N: 1},
		{Key: strings.Repeat("k", sluice.DefaultMaxKeyLength+1), Rule: good, N: 1},
		{Key: "k", Rule: sluice.Rule{}, N: 1},
		{Key: "k", Rule: sluice.FixedWindow(0, time.Second), N: 1},
		{Key: "k", Rule: good, N: -sluice.MaxLimit - 1},
	} {
		_, err := s.Take(context.Background(), req)
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || sluice.IsUnavailable(err) {
			t.Errorf("%+v: %v, want a *sluice.FieldError", req, err)
		}
	}
	if st := s.Stats(); st.Rounds != 0 {
		t.Errorf("%d rounds for invalid requests", st.Rounds)
	}
	if _, err := s.Take(context.Background(), sluice.Request{Key: "k", Rule: good, N: 1}); !sluice.IsUnavailable(err) {
		t.Errorf("valid request with no server: %v, want ErrStoreUnavailable", err)
	}
}

// TestFallbackTakesOver: distributed.NewFallback over a memcached store that dies answers
// from its local limiter, as over Redis.
func TestFallbackTakesOver(t *testing.T) {
	own := testenv.StartMemcached(t)
	clock := sluicetest.NewManualClock(t0)
	s := newStore(t, []string{own.Addr()}, memcached.WithClock(clock))
	fb, err := distributed.NewFallback(s, distributed.WithClock(clock), distributed.WithManualProbe())
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if err := fb.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	rule := sluice.FixedWindow(10, time.Minute)
	ctx := context.Background()
	for i := range 4 {
		if d, err := fb.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1}); err != nil || !d.Allowed {
			t.Fatalf("take %d on the store: %+v, %v", i, d, err)
		}
	}
	own.Kill()
	admitted := 0
	for range 20 {
		d, err := fb.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1})
		if err != nil {
			t.Fatalf("fallback: %v", err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if fb.Circuit() != distributed.CircuitOpen {
		t.Errorf("state %v after the server died, want %v", fb.Circuit(), distributed.CircuitOpen)
	}
	if admitted == 0 || admitted > 10 {
		t.Errorf("fallback admitted %d of 20, want between 1 and the limit 10", admitted)
	}
}

// silentServer returns the address of a server that accepts connections and never answers,
// until the test ends.
func silentServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return l.Addr().String()
}
