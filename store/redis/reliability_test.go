package redis_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/redis"
)

// delayProxy is a TCP proxy on 127.0.0.1 in front of a Redis that can hold Redis's replies
// back for a while: the commands reach Redis at once (and run), the replies come late.
type delayProxy struct {
	ln       net.Listener
	upstream string
	delay    atomic.Int64 // how long each reply chunk is held, in ns
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
	closed   bool
}

func startDelayProxy(t *testing.T, upstream string) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{ln: ln, upstream: upstream}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

func (p *delayProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_, _ = c.Close(), u.Close()
			return
		}
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(u, c); _ = u.Close() }()
		go func() {
			defer p.wg.Done()
			defer c.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := u.Read(buf)
				if n > 0 {
					if d := time.Duration(p.delay.Load()); d > 0 {
						time.Sleep(d)
					}
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func (p *delayProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// hammer calls decide from n goroutines, over and over, until the returned stop is called;
// stop returns once every goroutine has ended.
func hammer(n int, decide func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				decide()
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// consumed reads how much of a fixed window's limit a key has used, on a store that talks
// to Redis directly.
func consumed(t *testing.T, s *redis.Store, key string, rule sluice.Rule) int64 {
	t.Helper()
	d, err := s.Take(context.Background(), sluice.Request{Key: key, Rule: rule, N: 0})
	if err != nil {
		t.Fatal(err)
	}
	return rule.Limit - d.Remaining
}

// TestTimedOutScriptsNotRetried: a proxy holds Redis's replies back past the store's timeout,
// on and off, while 8 callers decide. A call that times out may have committed (the script
// ran; only its reply was late), so it must be reported as an error and never sent again: the
// count Redis holds is at least what callers were told was admitted, and at most that plus
// the calls that timed out.
func TestTimedOutScriptsNotRetried(t *testing.T) {
	addr := testenv.RedisAddr(t)
	proxy := startDelayProxy(t, addr)
	clock := sluicetest.NewManualClock(t0) // one fixed window for the whole test
	const timeout = 30 * time.Millisecond
	direct := standalone(t)
	prefix := testPrefix(t, direct)
	viaProxy, err := redis.NewFromURL("redis://"+proxy.Addr()+"?pool_size=8",
		redis.WithTimeout(timeout), redis.WithClock(clock), redis.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer viaProxy.Close()
	check, err := redis.New(direct, redis.WithClock(clock), redis.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()

	rule := sluice.FixedWindow(1_000_000, time.Hour)
	var admitted, timedOut, denied atomic.Int64
	var wrong atomic.Value
	stop := hammer(8, func() {
		d, err := viaProxy.Take(context.Background(), sluice.Request{Key: "k", Rule: rule, N: 1})
		switch {
		case err != nil && errors.Is(err, sluice.ErrStoreUnavailable):
			timedOut.Add(1)
		case err != nil:
			wrong.Store(err)
		case d.Allowed:
			admitted.Add(1)
		default:
			denied.Add(1)
		}
	})
	for range 6 { // 6 rounds: replies on time, then held back 4x the timeout
		time.Sleep(100 * time.Millisecond)
		proxy.delay.Store(int64(4 * timeout))
		time.Sleep(100 * time.Millisecond)
		proxy.delay.Store(0)
	}
	stop()
	proxy.close() // every reply still held has been delivered or dropped: Redis has run every call it got

	got := consumed(t, check, "k", rule)
	t.Logf("admitted %d, timed out %d, denied %d; Redis counts %d", admitted.Load(), timedOut.Load(), denied.Load(), got)
	if err, _ := wrong.Load().(error); err != nil {
		t.Errorf("a call failed with %v, want ErrStoreUnavailable", err)
	}
	if timedOut.Load() == 0 || admitted.Load() == 0 {
		t.Fatalf("the proxy did not cause both timeouts and answers (admitted %d, timed out %d)", admitted.Load(), timedOut.Load())
	}
	if denied.Load() != 0 {
		t.Errorf("%d calls denied under a limit of %d", denied.Load(), rule.Limit)
	}
	if got < admitted.Load() {
		t.Errorf("Redis counts %d, fewer than the %d callers were told were admitted", got, admitted.Load())
	}
	if got > admitted.Load()+timedOut.Load() {
		t.Errorf("Redis counts %d, more than admitted %d + timed out %d: a call was sent twice", got, admitted.Load(), timedOut.Load())
	}
}

// TestScriptCacheLost: Redis's script cache is flushed (SCRIPT FLUSH) again and again, and
// then Redis is restarted, while 4 callers decide. A flush costs no caller an error (the
// store reloads the script on NOSCRIPT and runs it once), and the counts stay exact on every
// algorithm; after the restart, decisions succeed again and count exactly on the new server.
func TestScriptCacheLost(t *testing.T) {
	srv := testenv.StartRedis(t)
	clock := sluicetest.NewManualClock(t0) // no refill and no window change: counts are exact
	s, err := redis.NewFromURL("redis://"+srv.Addr()+"?pool_size=4", redis.WithTimeout(time.Second), redis.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	direct := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer direct.Close()

	rules := map[string]sluice.Rule{}
	for _, a := range sluice.Algorithms() {
		r := sluice.Rule{Algorithm: a, Limit: 1_000_000, Period: time.Hour}
		if a == sluice.AlgorithmSlidingLog {
			r.Limit = 100_000 // a log of a million entries would be a slow script
		}
		rules[a.String()] = r
	}
	type counts struct{ admitted, failed atomic.Int64 }
	run := func(phase string) map[string]*counts {
		got := map[string]*counts{}
		for name := range rules {
			got[name] = &counts{}
		}
		stop := hammer(4, func() {
			for name, r := range rules {
				d, err := s.Take(context.Background(), sluice.Request{Key: phase + name, Rule: r, N: 1})
				switch {
				case err != nil:
					got[name].failed.Add(1)
				case d.Allowed:
					got[name].admitted.Add(1)
				}
			}
		})
		for range 20 {
			time.Sleep(10 * time.Millisecond)
			if err := direct.ScriptFlush(context.Background()).Err(); err != nil {
				t.Errorf("SCRIPT FLUSH: %v", err)
			}
		}
		stop()
		return got
	}
	verify := func(phase string, got map[string]*counts) {
		t.Helper()
		for name, r := range rules {
			c := got[name]
			d, err := s.Take(context.Background(), sluice.Request{Key: phase + name, Rule: r, N: 0})
			if err != nil {
				t.Fatal(err)
			}
			held := r.Capacity() - d.Remaining
			t.Logf("%s %s: admitted %d, failed %d, Redis holds %d", phase, name, c.admitted.Load(), c.failed.Load(), held)
			if c.failed.Load() != 0 {
				t.Errorf("%s %s: %d calls failed while the script cache was flushed", phase, name, c.failed.Load())
			}
			if c.admitted.Load() == 0 || held != c.admitted.Load() {
				t.Errorf("%s %s: Redis holds %d, callers were told %d were admitted", phase, name, held, c.admitted.Load())
			}
		}
	}
	verify("flush.", run("flush."))

	// A restart under load: decisions fail while Redis is down, then resume on the empty
	// restarted server, which must hold exactly what it admitted: at least the admissions of
	// calls sent after the kill, at most those plus the calls sent before it that were
	// answered after it. Once a decision has succeeded on it, no call fails.
	const (
		before = iota // sent before the kill
		down          // sent after the kill
		up            // sent after a decision succeeded on the restarted server
	)
	var phase atomic.Int32
	var admitted, failed [3]atomic.Int64
	var lateBefore atomic.Int64 // sent before the kill, admitted after it
	rule := rules["gcra"]
	stop := hammer(4, func() {
		p := phase.Load()
		d, err := s.Take(context.Background(), sluice.Request{Key: "restart", Rule: rule, N: 1})
		switch {
		case err != nil:
			failed[p].Add(1)
		case d.Allowed:
			admitted[p].Add(1)
			if p == before && phase.Load() != before {
				lateBefore.Add(1)
			}
			if p == down {
				phase.CompareAndSwap(down, up)
			}
		}
	})
	time.Sleep(50 * time.Millisecond)
	srv.Kill()
	phase.Store(down)
	time.Sleep(200 * time.Millisecond)
	srv.Start()
	deadline := time.Now().Add(3 * time.Second)
	for phase.Load() != up && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	stop()
	if phase.Load() != up {
		t.Fatal("no decision succeeded within 3s of the restart")
	}
	held := consumed(t, s, "restart", rule)
	t.Logf("restart under load: admitted %d before the kill, %d after; %d failed while down, %d after; the restarted Redis holds %d",
		admitted[before].Load(), admitted[down].Load()+admitted[up].Load(), failed[down].Load(), failed[up].Load(), held)
	if failed[down].Load() == 0 {
		t.Error("no decision failed while Redis was down")
	}
	if failed[up].Load() != 0 {
		t.Errorf("%d decisions failed after the restarted Redis had answered", failed[up].Load())
	}
	after := admitted[down].Load() + admitted[up].Load()
	if held < after || held > after+lateBefore.Load() {
		t.Errorf("the restarted Redis holds %d; sent after the kill and admitted: %d (+ %d sent before and admitted after)", held, after, lateBefore.Load())
	}
}
