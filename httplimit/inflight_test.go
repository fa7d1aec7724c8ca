package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// memoryLimiter is a limiter on a fresh memory store deciding on clock, and the Leases of its
// in-flight slots (pass WithLeases(ls) to read its counts).
func memoryLimiter(t *testing.T, clock sluice.Clock) (*sluice.Limiter, *sluice.Leases) {
	t.Helper()
	s, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	l := sluice.New(s, sluice.WithClock(clock))
	ls := sluice.NewLeases(s, sluice.WithClock(clock))
	t.Cleanup(func() { _ = ls.Close(); _ = s.Close() })
	return l, ls
}

// gate is a handler that holds each request until released, counting those inside.
type gate struct {
	mu      sync.Mutex
	inside  int
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.inside++
	g.mu.Unlock()
	g.entered <- struct{}{}
	<-g.release
	g.mu.Lock()
	g.inside--
	g.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// hold starts n requests from addr through h that enter g and wait there; the returned
// function lets them all finish and waits for their answers.
func hold(t *testing.T, h http.Handler, g *gate, n int, addr string) func() {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w := get(h, "/", from(addr)); w.Code != http.StatusNoContent {
				t.Errorf("held request answered %d", w.Code)
			}
		}()
	}
	for range n {
		select {
		case <-g.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("held requests did not reach the handler")
		}
	}
	return func() { close(g.release); wg.Wait() }
}

// Issue 24 item 2: with Limit.InFlight, a key holds at most Limit requests in the handler at
// once; the next is answered 429 with the policy named and Retry-After 1, other keys are not
// affected, and a slot is back as soon as its handler returns.
func TestInFlightLimit(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	l, ls := memoryLimiter(t, clock)
	g := newGate()
	h := Middleware(l, WithLeases(ls), WithLimits(Limit{Name: "busy", InFlight: &sluice.InFlight{Limit: 2}}))(g)
	done := hold(t, h, g, 2, "192.0.2.1:1")
	w := get(h, "/", from("192.0.2.1:2"))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("third request: %d %v %s", w.Code, w.Header(), w.Body)
	}
	var p ProblemDetails
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "busy" || p.Type != ProblemQuotaExceeded {
		t.Errorf("problem %+v (%v): %s", p, err, w.Body)
	}
	// another client has slots of its own (the key is the client's address)
	other := make(chan int)
	go func() { other <- get(h, "/", from("192.0.2.9:1")).Code }()
	<-g.entered
	done()
	if code := <-other; code != http.StatusNoContent {
		t.Errorf("another key: %d", code)
	}
	if n := ls.Held(); n != 0 {
		t.Errorf("%d leases held after every handler returned", n)
	}
	// the slots are back
	g2 := newGate()
	h2 := Middleware(l, WithLeases(ls), WithLimits(Limit{Name: "busy", InFlight: &sluice.InFlight{Limit: 2}}))(g2)
	hold(t, h2, g2, 2, "192.0.2.1:1")()
}

// A handler that panics still gives its slot back (net/http recovers the panic; the release
// is deferred).
func TestInFlightReleasedOnPanic(t *testing.T) {
	l, ls := memoryLimiter(t, sluicetest.NewManualClock(t0))
	h := Middleware(l, WithLeases(ls), WithLimits(Limit{Name: "one", InFlight: &sluice.InFlight{Limit: 1}}))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	for range 3 {
		func() {
			defer func() { _ = recover() }()
			get(h, "/", from("192.0.2.1:1"))
		}()
		if n := ls.Held(); n != 0 {
			t.Fatalf("%d leases held after a panicking handler", n)
		}
	}
}

// A rate limit and an in-flight limit on one Limit: a request the rate limit denies takes no
// slot, and the rate limit's headers are those of the rate alone.
func TestInFlightWithRate(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	l, ls := memoryLimiter(t, clock)
	var inside int
	h := Middleware(l, WithLeases(ls), WithLimits(Limit{Name: "api", Rule: sluice.Rule{Algorithm: sluice.AlgorithmFixedWindow, Limit: 2, Period: time.Minute},
		InFlight: &sluice.InFlight{Limit: 1}}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside = ls.Held()
	}))
	for i, want := range []int{200, 200, 429} {
		w := get(h, "/", from("192.0.2.1:1"))
		if w.Code != want {
			t.Fatalf("request %d: %d, want %d", i, w.Code, want)
		}
		if want == 200 && (inside != 1 || w.Header().Get("RateLimit-Policy") != `"api";q=2;w=60`) {
			t.Errorf("request %d: %d leases in the handler, policy %q", i, inside, w.Header().Get("RateLimit-Policy"))
		}
	}
	if n := ls.Held(); n != 0 {
		t.Errorf("%d leases held", n)
	}
}

// An adaptive limit refuses with 503 temporary-reduced-capacity, and learns from the time
// requests spend in the handler (on the middleware's clock).
func TestInFlightAdaptive(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	l, _ := memoryLimiter(t, clock)
	grad, err := adaptive.NewGradient(adaptive.Settings{Floor: 1, Ceiling: 1, Initial: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	h := Middleware(l, WithClock(clock), WithLimits(Limit{Name: "backend", Key: KeyFunc(func(*http.Request) (string, bool) { return "all", true }), InFlight: &sluice.InFlight{}, Adaptive: grad}))(g)
	done := hold(t, h, g, 1, "192.0.2.1:1")
	w := get(h, "/", from("192.0.2.2:1"))
	var p ProblemDetails
	if w.Code != http.StatusServiceUnavailable || json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Type != ProblemTemporaryReducedCapacity ||
		len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "backend" || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("over the adaptive limit: %d %v %s", w.Code, w.Header(), w.Body)
	}
	done()

	// a gradient that can move: steady 10 ms round trips with the limit in use grow it
	grad, _ = adaptive.NewGradient(adaptive.Settings{Floor: 1, Ceiling: 50, Initial: 1})
	h = Middleware(l, WithClock(clock), WithLimits(Limit{Name: "backend", Key: KeyFunc(func(*http.Request) (string, bool) { return "all", true }), InFlight: &sluice.InFlight{}, Adaptive: grad}))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { clock.Advance(10 * time.Millisecond) }))
	for range 20 {
		if w := get(h, "/", nil); w.Code != http.StatusOK {
			t.Fatalf("%d", w.Code)
		}
	}
	if grad.Limit() <= 1 {
		t.Errorf("adaptive limit %d after 20 steady requests at its limit, want above 1", grad.Limit())
	}
}

// Bad in-flight limits are configuration errors naming the field.
func TestInFlightConfigErrors(t *testing.T) {
	l, _ := memoryLimiter(t, sluicetest.NewManualClock(t0))
	grad, _ := adaptive.NewGradient(adaptive.Settings{})
	for field, lim := range map[string]Limit{
		"max_in_flight": {Name: "a", InFlight: &sluice.InFlight{}},
		"lease":         {Name: "a", InFlight: &sluice.InFlight{Limit: 1, Lease: time.Nanosecond}},
		"adaptive":      {Name: "a", Rule: sluice.PerSecond(1), Adaptive: grad},
		"hot":           {Name: "a", Rule: sluice.PerSecond(1), InFlight: &sluice.InFlight{Limit: 1}, Hot: &hotkey.Config{}},
	} {
		_, err := New(l, WithLimits(lim))
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// failingLeaser is a memory store whose leases fail while down is set.
type failingLeaser struct {
	*memory.Store
	mu   sync.Mutex
	down bool
}

func (f *failingLeaser) AcquireLease(ctx context.Context, req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return sluice.LeaseDecision{}, sluice.ErrStoreUnavailable
	}
	return f.Store.AcquireLease(ctx, req)
}

// A store that cannot take a slot is a store error: the failure policy applies (open: the
// request runs; closed: 503 naming the policy). A store that keeps no leases is a
// configuration error.
func TestInFlightStoreFailure(t *testing.T) {
	mem, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	st := &failingLeaser{Store: mem, down: true}
	l := sluice.New(st)
	lim := Limit{Name: "busy", InFlight: &sluice.InFlight{Limit: 1}}
	var stats Stats
	open := Middleware(l, WithLimits(lim), WithStats(&stats))(okHandler)
	if w := get(open, "/", nil); w.Code != http.StatusOK || stats.FailedOpen.Load() != 1 {
		t.Errorf("fail open: %d, %d failed open", w.Code, stats.FailedOpen.Load())
	}
	closed := Middleware(l, WithLimits(lim), WithFailurePolicy(distributed.FailClosed))(okHandler)
	if w := get(closed, "/", nil); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"violated-policies":["busy"]`) {
		t.Errorf("fail closed: %d %s", w.Code, w.Body)
	}
	if _, err := New(sluice.New(&sluicetest.Recorder{}), WithLimits(lim)); !errors.Is(err, sluice.ErrNoLeaser) {
		t.Errorf("a store without leases: %v", err)
	}
}
