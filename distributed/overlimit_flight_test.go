package distributed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// heldStore passes every Take to Store; while holding, a Take first announces itself on
// entered, then waits for a value on release (or for its context to end).
type heldStore struct {
	sluice.Store
	holding atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func newHeldStore(s sluice.Store) *heldStore {
	return &heldStore{Store: s, entered: make(chan struct{}, 256), release: make(chan struct{}, 256)}
}

func (h *heldStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if h.holding.Load() {
		h.entered <- struct{}{}
		select {
		case <-h.release:
		case <-ctx.Done():
			return sluice.Decision{}, ctx.Err()
		}
	}
	return h.Store.Take(ctx, req)
}

// hotKey is a key "k" over its limit (2 a minute, 2 taken) whose cached denial has passed on
// the cache's clock while the store, on a clock of its own that stands still, still denies:
// the moment at which, without a single flight, every concurrent request reaches the store.
type hotKey struct {
	o      *OverLimit
	cs     *sluicetest.CountingStore
	held   *heldStore
	rule   sluice.Rule
	memory sluice.Store
}

func newHotKey(t *testing.T) *hotKey {
	t.Helper()
	mem := newMemory(t, sluicetest.NewManualClock(t0))
	cs := &sluicetest.CountingStore{Store: mem}
	held := newHeldStore(cs)
	clock := sluicetest.NewManualClock(t0)
	o, err := NewOverLimit(held, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	h := &hotKey{o: o, cs: cs, held: held, rule: sluice.FixedWindow(2, time.Minute), memory: mem}
	for i := range 3 {
		if d, err := o.Take(context.Background(), h.req()); err != nil || d.Allowed != (i < 2) {
			t.Fatalf("warm-up %d: %+v %v", i, d, err)
		}
	}
	clock.Advance(time.Hour)
	return h
}

func (h *hotKey) req() sluice.Request { return sluice.Request{Key: "k", Rule: h.rule, N: 1} }

// refund gives n units back in the store itself, behind the cache's back.
func (h *hotKey) refund(t *testing.T, n int64) {
	t.Helper()
	if _, err := h.memory.Take(context.Background(), sluice.Request{Key: "k", Rule: h.rule, N: -n}); err != nil {
		t.Fatal(err)
	}
}

type result struct {
	d   sluice.Decision
	err error
}

// take starts a Take of the hot key with ctx; its result arrives on the returned channel.
func (h *hotKey) take(ctx context.Context) <-chan result {
	ch := make(chan result, 1)
	go func() {
		d, err := h.o.Take(ctx, h.req())
		ch <- result{d, err}
	}()
	return ch
}

// lead starts a Take that reaches the (holding) store and returns once it is there.
func (h *hotKey) lead(t *testing.T, ctx context.Context) <-chan result {
	t.Helper()
	h.held.holding.Store(true)
	ch := h.take(ctx)
	<-h.held.entered
	return ch
}

// waiters starts n Takes and returns once all of them wait for the key's call in flight.
func (h *hotKey) waiters(t *testing.T, n int) []<-chan result {
	t.Helper()
	chs := make([]<-chan result, n)
	for i := range chs {
		chs[i] = h.take(context.Background())
	}
	h.awaitWaiting(t, int64(n))
	return chs
}

// awaitWaiting returns once n requests wait for a call in flight. A request that reaches the
// store instead fails the test.
func (h *hotKey) awaitWaiting(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for h.o.waiting.Load() != n {
		select {
		case <-h.held.entered:
			t.Fatalf("a request reached the store while the key's call was in flight (%d waiting)", h.o.waiting.Load())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests waiting, want %d", h.o.waiting.Load(), n)
		}
		runtime.Gosched()
	}
}

// collect returns the results of chs, counting the allowed ones.
func collect(t *testing.T, chs []<-chan result) (allowed int, rs []result) {
	t.Helper()
	for _, ch := range chs {
		r := <-ch
		if r.err != nil {
			t.Fatalf("a waiter failed: %v", r.err)
		}
		if r.d.Allowed {
			allowed++
		}
		rs = append(rs, r)
	}
	return allowed, rs
}

// noFlight fails the test when an entry of o still has a call in flight or a request waits.
func noFlight(t *testing.T, o *OverLimit) {
	t.Helper()
	for i := range 32 {
		sh := o.denials.At(i)
		sh.Lock()
		sh.Range(func(key string, e denial) {
			if e.flight != nil {
				t.Errorf("key %q still has a call in flight", key)
			}
		})
		sh.Unlock()
	}
	if n := o.waiting.Load(); n != 0 {
		t.Errorf("%d requests still waiting", n)
	}
}

// While a key's cached denial has passed and its first request is at the store, the others
// wait for that call and are answered with its denial: one store call for 51 requests.
func TestOverLimitSingleFlightDenied(t *testing.T) {
	h := newHotKey(t)
	before := h.cs.Calls()
	leader := h.lead(t, context.Background())
	chs := h.waiters(t, 50)
	h.held.release <- struct{}{}
	chs = append(chs, leader)
	allowed, rs := collect(t, chs)
	if allowed != 0 {
		t.Fatalf("%d allowed, want 0", allowed)
	}
	for _, r := range rs {
		if r.d.RetryAfter <= 0 || r.d.RetryAfter != rs[len(rs)-1].d.RetryAfter {
			t.Fatalf("RetryAfter %v, want the leader's %v", r.d.RetryAfter, rs[len(rs)-1].d.RetryAfter)
		}
	}
	if got := h.cs.Calls() - before; got != 1 {
		t.Fatalf("%d store calls for 51 concurrent requests, want 1", got)
	}
	noFlight(t, h.o)
}

// A call admitted that leaves the key at its limit has no denial to share: the next waiter
// makes the key's one call, whose denial answers the rest. Two store calls, one allow.
func TestOverLimitSingleFlightAdmittedAtLimit(t *testing.T) {
	h := newHotKey(t)
	h.refund(t, 1)
	before := h.cs.Calls()
	leader := h.lead(t, context.Background())
	chs := h.waiters(t, 50)
	h.held.release <- struct{}{}
	if r := <-leader; r.err != nil || !r.d.Allowed || r.d.Remaining != 0 {
		t.Fatalf("leader: %+v %v, want allowed with 0 remaining", r.d, r.err)
	}
	<-h.held.entered // the next leader
	h.awaitWaiting(t, 49)
	h.held.release <- struct{}{}
	if allowed, _ := collect(t, chs); allowed != 0 {
		t.Fatalf("%d waiters allowed, want 0 (the store had one unit, the leader took it)", allowed)
	}
	if got := h.cs.Calls() - before; got != 2 {
		t.Fatalf("%d store calls, want 2", got)
	}
	noFlight(t, h.o)
}

// admitted has the hot key's store give 2 units back, holds a leader at the store while n
// requests wait for it, then lets them all go: the leader is admitted with 1 unit left. It
// returns the requests admitted and the store calls made.
func admitted(t *testing.T, h *hotKey, n int) (allowed int, calls int64) {
	t.Helper()
	h.refund(t, 2)
	before := h.cs.Calls()
	leader := h.lead(t, context.Background())
	chs := h.waiters(t, n)
	h.held.holding.Store(false)
	h.held.release <- struct{}{}
	allowed, _ = collect(t, append(chs, leader))
	return allowed, h.cs.Calls() - before
}

// A call admitted with room left for some of its waiters sends that many of them to the store
// on their own; the next of the others makes the key's next call, whose denial answers the
// rest. The store decides each allow.
func TestOverLimitSingleFlightAdmittedWithRoomForSome(t *testing.T) {
	h := newHotKey(t)
	allowed, calls := admitted(t, h, 50)
	if allowed != 2 {
		t.Fatalf("%d allowed, want 2 (the store's two units)", allowed)
	}
	// The leader, the waiter with a pass and the next leader; one more when the next leader
	// took the last unit before the waiter with a pass.
	if calls != 3 && calls != 4 {
		t.Fatalf("%d store calls, want 3 or 4", calls)
	}
	noFlight(t, h.o)
}

// A call admitted with room left for all its waiters sends them all to the store, as without
// the cache, and drops the key's mark.
func TestOverLimitSingleFlightAdmittedWithRoomForAll(t *testing.T) {
	h := newHotKey(t)
	if allowed, calls := admitted(t, h, 1); allowed != 2 || calls != 2 {
		t.Fatalf("%d allowed in %d store calls, want 2 in 2", allowed, calls)
	}
	if n := h.o.Len(); n != 0 {
		t.Fatalf("%d entries, want none: the key has room", n)
	}
}

// A leader that gives up (its context canceled at the store) releases its waiters, which ask
// the store themselves, and the next request probes the store again.
func TestOverLimitSingleFlightLeaderCanceled(t *testing.T) {
	h := newHotKey(t)
	ctx, cancel := context.WithCancel(context.Background())
	leader := h.lead(t, ctx)
	chs := h.waiters(t, 20)
	h.held.holding.Store(false)
	before := h.cs.Calls()
	cancel()
	if r := <-leader; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("canceled leader: %+v %v", r.d, r.err)
	}
	if allowed, _ := collect(t, chs); allowed != 0 {
		t.Fatalf("%d allowed, want 0", allowed)
	}
	if got := h.cs.Calls() - before; got < 1 || got > 20 {
		t.Fatalf("%d store calls from 20 released waiters", got)
	}
	noFlight(t, h.o)
}

// A waiter whose context ends stops waiting at once, with the error a store call would give;
// the call in flight and its other waiters carry on.
func TestOverLimitSingleFlightWaiterDeadline(t *testing.T) {
	h := newHotKey(t)
	leader := h.lead(t, context.Background())
	others := h.waiters(t, 5)
	ctx, cancel := context.WithCancel(context.Background())
	mine := h.take(ctx)
	h.awaitWaiting(t, 6)
	cancel()
	r := <-mine
	if !errors.Is(r.err, sluice.ErrStoreUnavailable) || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a waiter whose context ended: %+v %v, want ErrStoreUnavailable and context.Canceled", r.d, r.err)
	}
	h.awaitWaiting(t, 5)
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := h.o.Take(ctx, h.req()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiter past its deadline: %v", err)
	}
	h.held.release <- struct{}{}
	if allowed, _ := collect(t, append(others, leader)); allowed != 0 {
		t.Fatalf("%d allowed, want 0", allowed)
	}
	noFlight(t, h.o)
}

// Requests that bypass the cache (peeks, settles, waits) never wait for a key's call
// in flight.
func TestOverLimitSingleFlightBypass(t *testing.T) {
	h := newHotKey(t)
	leader := h.lead(t, context.Background())
	h.held.holding.Store(false)
	for _, req := range []sluice.Request{{N: 0}, {N: 1, Settle: true}, {N: 1, MaxDelay: time.Hour}, {N: -1, Settle: true}} {
		req.Key, req.Rule = "k", h.rule
		if _, err := h.o.Take(context.Background(), req); err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
	}
	if n := h.o.waiting.Load(); n != 0 {
		t.Fatalf("%d waiting", n)
	}
	h.held.release <- struct{}{}
	<-leader
	noFlight(t, h.o)
}

// tallyStore counts the calls and the allows of the store behind it.
type tallyStore struct {
	sluice.Store
	calls, allowed atomic.Int64
}

func (s *tallyStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	s.calls.Add(1)
	d, err := s.Store.Take(ctx, req)
	if err == nil && d.Allowed && req.N > 0 {
		s.allowed.Add(1)
	}
	return d, err
}

// TestOverLimitSingleFlightProperty: concurrent requests on a few hot keys, with contexts that
// end at random, a store that fails or hangs at random and clocks that move: every request
// returns, every error is one a store call could give (sluice.ErrStoreUnavailable), the
// requests allowed are exactly those the store allowed, and afterwards no key is left with a
// call in flight or a waiter, and each key's next request probes the store again.
func TestOverLimitSingleFlightProperty(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for seed := range uint64(rounds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { singleFlightRound(t, seed) })
	}
}

func singleFlightRound(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 26))
	storeClock, cacheClock := sluicetest.NewManualClock(t0), sluicetest.NewManualClock(t0)
	flaky := sluicetest.NewFlakyStore(newMemory(t, storeClock))
	tally := &tallyStore{Store: flaky}
	o, err := NewOverLimit(tally, WithClock(cacheClock))
	if err != nil {
		t.Fatal(err)
	}
	rule := sluice.FixedWindow(3, time.Minute)
	keys := []string{"a", "b", "c"}
	for _, k := range keys {
		for range 4 {
			o.Take(context.Background(), sluice.Request{Key: k, Rule: rule, N: 1})
		}
	}
	warm := tally.allowed.Load()
	var returned, allowed atomic.Int64
	var wg sync.WaitGroup
	const workers, ops = 12, 25
	errs := make(chan error, workers*ops)
	for w := range workers {
		wg.Add(1)
		go func(r *rand.Rand) {
			defer wg.Done()
			for range ops {
				req := sluice.Request{Key: keys[r.IntN(len(keys))], Rule: rule, N: 1 + r.Int64N(2)}
				timeout := []time.Duration{0, 50 * time.Microsecond, time.Millisecond, 5 * time.Millisecond}[r.IntN(4)]
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				d, err := o.Take(ctx, req)
				cancel()
				returned.Add(1)
				switch {
				case err != nil && !errors.Is(err, sluice.ErrStoreUnavailable):
					errs <- fmt.Errorf("%+v: %w, want one wrapping ErrStoreUnavailable", req, err)
				case err == nil && d.Allowed:
					allowed.Add(1)
				}
			}
		}(rand.New(rand.NewPCG(seed, uint64(w))))
	}
	stop := make(chan struct{})
	controlled := make(chan struct{})
	go func() { // the store fails and hangs at random; the clocks move
		defer close(controlled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			switch rng.IntN(6) {
			case 0:
				flaky.SetFailing(rng.IntN(3) == 0)
			case 1:
				flaky.SetHanging(rng.IntN(4) == 0)
			case 2:
				cacheClock.Advance(time.Duration(rng.IntN(90)) * time.Second)
			case 3:
				if rng.IntN(8) == 0 {
					storeClock.Advance(time.Minute)
				}
			}
			runtime.Gosched()
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		close(stop)
		buf := make([]byte, 1<<20)
		t.Fatalf("%d of %d requests returned in 60 s:\n%s", returned.Load(), workers*ops, buf[:runtime.Stack(buf, true)])
	}
	close(stop)
	<-controlled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if a, s := allowed.Load(), tally.allowed.Load()-warm; a != s {
		t.Errorf("%d requests allowed, the store allowed %d", a, s)
	}
	noFlight(t, o)
	flaky.SetFailing(false)
	flaky.SetHanging(false)
	cacheClock.Advance(time.Hour)
	for _, k := range keys {
		calls := tally.calls.Load()
		if _, err := o.Take(context.Background(), sluice.Request{Key: k, Rule: rule, N: 1}); err != nil {
			t.Errorf("key %s afterwards: %v", k, err)
		}
		if tally.calls.Load() != calls+1 {
			t.Errorf("key %s afterwards: %d store calls, want 1 (a probe)", k, tally.calls.Load()-calls)
		}
	}
}

// A denial refreshed by a key's single call is served without allocating, and a key never
// denied pays nothing for the single flight.
func TestOverLimitSingleFlightAllocatesNothing(t *testing.T) {
	h := newHotKey(t)
	ctx := context.Background()
	calls := h.cs.Calls()
	if d, err := h.o.Take(ctx, h.req()); err != nil || d.Allowed || h.cs.Calls() != calls+1 {
		t.Fatalf("the key's call: %+v %v", d, err)
	}
	if a := testing.AllocsPerRun(1000, func() { h.o.Take(ctx, h.req()) }); a != 0 {
		t.Fatalf("a denial refreshed by the key's call allocates %v times", a)
	}
	o, err := NewOverLimit(admitAll{})
	if err != nil {
		t.Fatal(err)
	}
	free := sluice.Request{Key: "free", Rule: h.rule, N: 1}
	if a := testing.AllocsPerRun(1000, func() { o.Take(ctx, free) }); a != 0 {
		t.Fatalf("an allow of a key never denied allocates %v times over a store that allocates nothing", a)
	}
}

// admitAll admits everything, allocating nothing.
type admitAll struct{}

func (admitAll) Take(_ context.Context, req sluice.Request) (sluice.Decision, error) {
	return sluice.Decision{Allowed: true, Capacity: req.Rule.Limit, Remaining: req.Rule.Limit}, nil
}
