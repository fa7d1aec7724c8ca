package redis_test

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/redis"
)

// fakeServer is a TCP listener on 127.0.0.1 that counts connections and never answers: a
// Redis that is stuck (or, closed, one that is down).
type fakeServer struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	open  []net.Conn
}

func newFakeServer(t *testing.T) *fakeServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.conns.Add(1)
			f.mu.Lock()
			f.open = append(f.open, c)
			f.mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		for _, c := range f.open {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fakeServer) addr() string { return f.ln.Addr().String() }

// TestBadInputBeforeRedis: invalid requests fail with the right sentinel error and never
// open a connection.
func TestBadInputBeforeRedis(t *testing.T) {
	f := newFakeServer(t)
	c := goredis.NewClient(&goredis.Options{Addr: f.addr(), MaxRetries: -1})
	defer c.Close()
	s, err := redis.New(c, redis.WithMaxKeyLength(16), redis.WithTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	good := sluice.TokenBucket(10, time.Second, 0)
	for _, tc := range []struct {
		req  sluice.Request
		want error
		word string
	}{
		{sluice.Request{Key: "", Rule: good, N: 1}, sluice.ErrInvalidKey, "key"},
		{sluice.Request{Key: strings.Repeat("k", 17), Rule: good, N: 1}, sluice.ErrInvalidKey, "key"},
		{sluice.Request{Key: "k", Rule: sluice.Rule{Algorithm: 99, Limit: 1, Period: time.Second}, N: 1}, sluice.ErrInvalidRule, "algorithm"},
		{sluice.Request{Key: "k", Rule: sluice.Rule{Algorithm: sluice.AlgorithmGCRA, Limit: 0, Period: time.Second}, N: 1}, sluice.ErrInvalidRule, "limit"},
		{sluice.Request{Key: "k", Rule: sluice.Rule{Algorithm: sluice.AlgorithmGCRA, Limit: 1, Period: 0}, N: 1}, sluice.ErrInvalidRule, "period"},
		{sluice.Request{Key: "k", Rule: sluice.Rule{Algorithm: sluice.AlgorithmFixedWindow, Limit: 1, Period: time.Second, Burst: 2}, N: 1}, sluice.ErrInvalidRule, "burst"},
		{sluice.Request{Key: "k", Rule: good, N: -2 * sluice.MaxLimit}, sluice.ErrInvalidN, "n"},
		{sluice.Request{Key: "k", Rule: good, N: 1, MaxDelay: -1}, sluice.ErrInvalidN, "max_delay"},
	} {
		_, err := s.Take(context.Background(), tc.req)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.word) {
			t.Errorf("%+v: got %v, want %v naming %q", tc.req, err, tc.want, tc.word)
		}
	}
	if n := f.conns.Load(); n != 0 {
		t.Errorf("bad input opened %d connections to Redis", n)
	}
}

// failedCalls makes n calls on a store that cannot answer and checks each fails with
// ErrStoreUnavailable within its timeout, and that no goroutine is left behind.
func failedCalls(t *testing.T, addr string, n int) {
	before := runtime.NumGoroutine()
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: 50 * time.Millisecond})
	const timeout = 30 * time.Millisecond
	s, err := redis.New(c, redis.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var slow, wrong atomic.Int64
	sem := make(chan struct{}, 50)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			start := time.Now()
			_, err := s.Take(context.Background(), sluice.Request{Key: "k", Rule: sluice.GCRA(10, time.Second, 0), N: 1})
			if time.Since(start) > timeout+250*time.Millisecond {
				slow.Add(1)
			}
			if !errors.Is(err, sluice.ErrStoreUnavailable) {
				wrong.Add(1)
			}
		}()
	}
	wg.Wait()
	if slow.Load() > 0 || wrong.Load() > 0 {
		t.Errorf("%d of %d calls took longer than the timeout, %d did not fail with ErrStoreUnavailable", slow.Load(), n, wrong.Load())
	}
	_ = s.Close()
	_ = c.Close()
	// Goroutines wind down asynchronously (connection readers): wait, bounded.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before+2 {
		t.Errorf("goroutines: %d before, %d after %d failed calls", before, g, n)
	}
}

// TestUnreachable: connection refused fails fast with ErrStoreUnavailable; no leak after 1000.
func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	failedCalls(t, addr, 1000)
}

// TestStuckServer: a server that accepts but never answers holds no caller past its timeout.
func TestStuckServer(t *testing.T) {
	f := newFakeServer(t)
	failedCalls(t, f.addr(), 1000)
}

// TestStuckServerDirect: one goroutine, so every call takes the direct path (no worker
// between the caller and the socket); each still fails within its timeout.
func TestStuckServerDirect(t *testing.T) {
	f := newFakeServer(t)
	c := goredis.NewClient(&goredis.Options{Addr: f.addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	const timeout = 30 * time.Millisecond
	s, err := redis.New(c, redis.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 20; i++ {
		start := time.Now()
		_, err := s.Take(context.Background(), sluice.Request{Key: "k", Rule: sluice.GCRA(10, time.Second, 0), N: 1})
		if !errors.Is(err, sluice.ErrStoreUnavailable) {
			t.Fatalf("call %d: %v, want ErrStoreUnavailable", i, err)
		}
		if d := time.Since(start); d > timeout+250*time.Millisecond {
			t.Fatalf("call %d took %v, timeout %v", i, d, timeout)
		}
	}
}

func TestCloseThenTake(t *testing.T) {
	s, err := redis.New(goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := s.Take(context.Background(), sluice.Request{Key: "k", Rule: sluice.GCRA(1, time.Second, 0), N: 1}); !errors.Is(err, sluice.ErrClosed) {
		t.Fatalf("Take after Close: %v, want ErrClosed", err)
	}
}

func TestOptionErrors(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, tc := range []struct {
		opt  redis.Option
		name string
	}{
		{redis.WithTimeout(0), "WithTimeout"},
		{redis.WithPrefix("a{b}"), "WithPrefix"},
		{redis.WithMaxKeyLength(-1), "WithMaxKeyLength"},
		{redis.WithMaxBatch(0), "WithMaxBatch"},
		{redis.WithMaxBatchDelay(-1), "WithMaxBatchDelay"},
		{redis.WithMaxInFlight(0), "WithMaxInFlight"},
	} {
		if _, err := redis.New(c, tc.opt); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: got %v, want an error naming it", tc.name, err)
		}
	}
	if _, err := redis.New(nil); err == nil {
		t.Error("New(nil): no error")
	}
}
