package sluice_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func newLimiter(t *testing.T, opts ...sluice.Option) (*sluice.Limiter, *sluicetest.ManualClock) {
	clock := sluicetest.NewManualClock(t0)
	s, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return sluice.New(s, append([]sluice.Option{sluice.WithClock(clock)}, opts...)...), clock
}

func TestNilStore(t *testing.T) {
	l := sluice.New(nil)
	ctx := context.Background()
	if _, err := l.Allow(ctx, "k", sluice.PerSecond(1)); !errors.Is(err, sluice.ErrNoStore) {
		t.Errorf("Allow: %v", err)
	}
	if err := l.Wait(ctx, "k", sluice.PerSecond(1)); !errors.Is(err, sluice.ErrNoStore) {
		t.Errorf("Wait: %v", err)
	}
	if _, err := l.AllowAll(ctx, []sluice.Check{{Key: "k", Rule: sluice.PerSecond(1)}}); !errors.Is(err, sluice.ErrNoStore) {
		t.Errorf("AllowAll: %v", err)
	}
}

func TestAllowPeek(t *testing.T) {
	l, _ := newLimiter(t)
	ctx := context.Background()
	r := sluice.FixedWindow(2, time.Second)
	for i, want := range []bool{true, true, false} {
		d, err := l.Allow(ctx, "k", r)
		if err != nil || d.Allowed != want {
			t.Fatalf("allow %d: %+v %v", i, d, err)
		}
	}
	d, err := l.Peek(ctx, "k", r)
	if err != nil || d.Remaining != 0 || d.ResetAfter != time.Second {
		t.Errorf("peek: %+v %v", d, err)
	}
	if _, err := l.Allow(ctx, "", r); !errors.Is(err, sluice.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
}

// waitResult runs WaitN in a goroutine and returns a channel for its error.
func waitAsync(l *sluice.Limiter, ctx context.Context, key string, r sluice.Rule) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- l.Wait(ctx, key, r) }()
	return ch
}

// blockUntilWaiting waits (in real time, briefly) until n goroutines sleep on the clock.
func blockUntilWaiting(t *testing.T, c *sluicetest.ManualClock, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines waiting on the clock, want %d", c.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWaitLeakyBucketShapes(t *testing.T) {
	l, clock := newLimiter(t)
	ctx := context.Background()
	r := sluice.LeakyBucket(10, time.Second, 3) // one every 100 ms, queue of 3
	if err := l.Wait(ctx, "q", r); err != nil {
		t.Fatalf("first: %v", err)
	}
	second := waitAsync(l, ctx, "q", r)
	blockUntilWaiting(t, clock, 1)
	third := waitAsync(l, ctx, "q", r)
	blockUntilWaiting(t, clock, 2)
	// The queue (3 units) is full: the fourth is refused at once.
	if err := l.Wait(ctx, "q", r); !errors.Is(err, sluice.ErrWaitTooLong) {
		t.Fatalf("fourth: %v, want ErrWaitTooLong", err)
	}
	clock.Advance(99 * time.Millisecond)
	select {
	case err := <-second:
		t.Fatalf("second left after 99ms (err %v), want 100ms", err)
	default:
	}
	clock.Advance(time.Millisecond)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	clock.Advance(100 * time.Millisecond)
	if err := <-third; err != nil {
		t.Fatal(err)
	}
}

func TestWaitRespectsDeadlineAndRefundsOnCancel(t *testing.T) {
	l, clock := newLimiter(t)
	r := sluice.GCRA(10, time.Second, 1)
	ctx := context.Background()
	if err := l.Wait(ctx, "g", r); err != nil {
		t.Fatal(err)
	}
	// The next slot is 100 ms away: a 50 ms deadline is refused at once, consuming nothing.
	short, cancelShort := context.WithDeadline(ctx, clock.Now().Add(50*time.Millisecond))
	defer cancelShort()
	if err := l.Wait(short, "g", r); !errors.Is(err, sluice.ErrWaitTooLong) {
		t.Fatalf("short deadline: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := waitAsync(l, cctx, "g", r)
	blockUntilWaiting(t, clock, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	// The cancelled wait was refunded: after 100 ms one unit is free again.
	clock.Advance(100 * time.Millisecond)
	d, err := l.Allow(ctx, "g", r)
	if err != nil || !d.Allowed {
		t.Fatalf("after refund: %+v %v", d, err)
	}
}

func TestWaitWindowAlgorithmSleepsRetryAfter(t *testing.T) {
	l, clock := newLimiter(t)
	r := sluice.FixedWindow(1, time.Second)
	ctx := context.Background()
	if err := l.Wait(ctx, "w", r); err != nil {
		t.Fatal(err)
	}
	done := waitAsync(l, ctx, "w", r)
	blockUntilWaiting(t, clock, 1)
	clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := l.WaitN(ctx, "w", r, 2); !errors.Is(err, sluice.ErrWaitTooLong) {
		t.Errorf("n above capacity: %v", err)
	}
	if err := l.WaitN(ctx, "w", r, -1); !errors.Is(err, sluice.ErrInvalidN) {
		t.Errorf("negative n: %v", err)
	}
}

func TestAllowAllConsumesFromNoneWhenOneDenies(t *testing.T) {
	l, _ := newLimiter(t)
	ctx := context.Background()
	client := sluice.FixedWindow(10, time.Minute)
	guard := sluice.FixedWindow(2, time.Second)
	checks := func() []sluice.Check {
		return []sluice.Check{{Key: "client:1", Rule: client}, {Key: "instance", Rule: guard}}
	}
	for i := 0; i < 2; i++ {
		d, err := l.AllowAll(ctx, checks())
		if err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v %v", i, d, err)
		}
	}
	cs := checks()
	d, err := l.AllowAll(ctx, cs)
	if err != nil || d.Allowed {
		t.Fatalf("third request: %+v %v, want denied by the guard", d, err)
	}
	if d.RetryAfter != time.Second || d.Remaining != 0 {
		t.Errorf("combined decision %+v", d)
	}
	if cs[0].Decision.Remaining != 8 || !cs[0].Decision.Allowed || cs[1].Decision.Allowed {
		t.Errorf("per-check decisions: %+v / %+v", cs[0].Decision, cs[1].Decision)
	}
	// The client quota was refunded: 8 left, not 7.
	p, _ := l.Peek(ctx, "client:1", client)
	if p.Remaining != 8 {
		t.Errorf("client quota after a denied layered request: %d left, want 8", p.Remaining)
	}
	// A denial by the first check peeks the rest without consuming.
	full := []sluice.Check{{Key: "client:1", Rule: client, N: 9}, {Key: "other", Rule: guard}}
	if d, _ := l.AllowAll(ctx, full); d.Allowed || full[1].Decision.Remaining != 2 {
		t.Errorf("denied first check: %+v, second %+v", d, full[1].Decision)
	}
	if _, err := l.AllowAll(ctx, nil); err == nil {
		t.Error("AllowAll with no checks: no error")
	}
	bad := []sluice.Check{{Key: "client:1", Rule: client}, {Key: "", Rule: guard}}
	if _, err := l.AllowAll(ctx, bad); !errors.Is(err, sluice.ErrInvalidKey) {
		t.Errorf("bad second key: %v", err)
	}
	if p, _ := l.Peek(ctx, "client:1", client); p.Remaining != 8 {
		t.Errorf("client quota after an erroring layered request: %d left, want 8", p.Remaining)
	}
}

func TestDynamicRule(t *testing.T) {
	l, _ := newLimiter(t)
	ctx := context.Background()
	dr, err := sluice.NewDynamicRule(sluice.FixedWindow(5, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		l.Allow(ctx, "dyn", dr.Load())
	}
	if err := dr.Set(sluice.FixedWindow(0, time.Minute)); !errors.Is(err, sluice.ErrInvalidRule) {
		t.Fatalf("Set invalid: %v", err)
	}
	if err := dr.Set(sluice.FixedWindow(3, time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The 4 units consumed under the old limit still count: lowered to 3, the key is over.
	if d, _ := l.Allow(ctx, "dyn", dr.Load()); d.Allowed {
		t.Errorf("after lowering the limit below the consumed count: %+v", d)
	}
	dr.Set(sluice.FixedWindow(6, time.Minute))
	if d, _ := l.Allow(ctx, "dyn", dr.Load()); !d.Allowed || d.Remaining != 1 {
		t.Errorf("after raising the limit to 6: %+v, want allowed with 1 left", d)
	}
}

func TestSettle(t *testing.T) {
	l, clock := newLimiter(t)
	ctx := context.Background()
	rule := sluice.FixedWindow(10, time.Second)
	if d, err := l.AllowN(ctx, "k", rule, 8); err != nil || !d.Allowed {
		t.Fatalf("estimate 8: %+v %v", d, err)
	}
	d, err := l.Settle(ctx, "k", rule, -5) // cost 3
	if err != nil || !d.Allowed || d.Remaining != 7 {
		t.Fatalf("settle -5: %+v %v, want allowed with 7 remaining", d, err)
	}
	d, err = l.Settle(ctx, "k", rule, 12) // cost 15 in all: 5 past the limit
	if err != nil || !d.Allowed || d.Remaining != 0 || d.RetryAfter != time.Second {
		t.Fatalf("settle 12: %+v %v, want allowed, 0 remaining, debt paid with the window in 1s", d, err)
	}
	if d, _ := l.Allow(ctx, "k", rule); d.Allowed {
		t.Fatalf("a request while in debt: %+v, want denied", d)
	}
	clock.Advance(time.Second)
	if d, _ := l.Allow(ctx, "k", rule); !d.Allowed {
		t.Fatalf("a request in the next window: %+v, want allowed", d)
	}
	if _, err := l.Settle(ctx, "k", rule, sluice.MaxLimit+1); !errors.Is(err, sluice.ErrInvalidN) {
		t.Errorf("settle above MaxLimit: %v, want ErrInvalidN", err)
	}
	if _, err := sluice.New(nil).Settle(ctx, "k", rule, 1); !errors.Is(err, sluice.ErrNoStore) {
		t.Errorf("settle without a store: %v, want ErrNoStore", err)
	}
}

// TestWaitAll: WaitAll sleeps on the limiter's clock until every check admits, refuses at once
// a wait longer than its bound, and returns the context's error when it ends while waiting.
func TestWaitAll(t *testing.T) {
	l, clock := newLimiter(t)
	ctx := context.Background()
	checks := func() []sluice.Check {
		return []sluice.Check{{Key: "a", Rule: sluice.FixedWindow(1, time.Second)}, {Key: "b", Rule: sluice.FixedWindow(5, time.Minute)}}
	}
	if d, err := l.WaitAll(ctx, checks(), time.Second); err != nil || !d.Allowed {
		t.Fatalf("first: %+v, %v", d, err)
	}
	// "a" is spent until the next second: a wait of at most 100 ms is refused at once.
	if d, err := l.WaitAll(ctx, checks(), 100*time.Millisecond); err != nil || d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("short wait: %+v, %v; want denied with RetryAfter 1s", d, err)
	}
	done := make(chan sluice.Decision, 1)
	go func() {
		d, err := l.WaitAll(ctx, checks(), 2*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- d
	}()
	blockUntilWaiting(t, clock, 1)
	clock.Advance(time.Second)
	if d := <-done; !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after the wait: %+v, want allowed with 0 remaining (a's)", d)
	}
	cctx, cancel := context.WithCancel(ctx)
	errs := make(chan error, 1)
	go func() { _, err := l.WaitAll(cctx, checks(), 2*time.Second); errs <- err }()
	blockUntilWaiting(t, clock, 1)
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
