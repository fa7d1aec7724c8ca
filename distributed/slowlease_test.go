package distributed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// slowStore is a store that is up but slow: each call is applied after a random delay whether
// or not its caller still waits (as Redis runs a script whose reply the client stopped
// waiting for), and the caller gets ErrStoreUnavailable when its context ends first.
type slowStore struct {
	mem   *memory.Store
	delay func() time.Duration
}

func slowCall[T any](ctx context.Context, s *slowStore, call func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	d := s.delay()
	go func() {
		time.Sleep(d) // the store's own latency, not a test's wait
		v, err := call(context.Background())
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("slow store: %w: %w", sluice.ErrStoreUnavailable, ctx.Err())
	}
}

func (s *slowStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	return slowCall(ctx, s, func(ctx context.Context) (sluice.Decision, error) { return s.mem.Take(ctx, req) })
}

func (s *slowStore) AcquireLease(ctx context.Context, req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	return slowCall(ctx, s, func(ctx context.Context) (sluice.LeaseDecision, error) { return s.mem.AcquireLease(ctx, req) })
}

func (s *slowStore) RenewLeases(ctx context.Context, batch []sluice.LeaseRenewal) error {
	_, err := slowCall(ctx, s, func(ctx context.Context) (struct{}, error) { return struct{}{}, s.mem.RenewLeases(ctx, batch) })
	return err
}

func (s *slowStore) ReleaseLease(ctx context.Context, key string, id sluice.LeaseID) error {
	_, err := slowCall(ctx, s, func(ctx context.Context) (struct{}, error) { return struct{}{}, s.mem.ReleaseLease(ctx, key, id) })
	return err
}

// TestFallbackSlowStoreKeepsInFlight (issue 31 item 9): with FailLocal, a store that is up but
// slow (answers spread around the Fallback's timeout, so rate decisions time out and open
// every instance's circuit, again and again) never lets a fleet hold more than max_in_flight:
// leases stay the store's while it answers, a timed-out acquire is an error (its lease id
// released in the background), never a local grant. Before, 11-17 were in flight for a limit
// of 10. Property: four instances, 40 workers, random latencies and hold times from a seeded
// source; what the test counts is the slots held at once.
func TestFallbackSlowStoreKeepsInFlight(t *testing.T) {
	mem, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	var rmu sync.Mutex
	rng := rand.New(rand.NewPCG(31, 9))
	st := &slowStore{mem: mem, delay: func() time.Duration {
		rmu.Lock()
		defer rmu.Unlock()
		if rng.IntN(5) == 0 {
			return time.Duration(25+rng.IntN(50)) * time.Millisecond // past the timeout
		}
		return time.Duration(rng.IntN(5)) * time.Millisecond
	}}
	const instances, limit = 4, 10
	var opened atomic.Int64
	var fleet []*sluice.Leases
	var limiters []*sluice.Limiter
	for i := range instances {
		f, err := NewFallback(st, WithTimeout(20*time.Millisecond), WithInstances(instances), WithInstanceID(fmt.Sprint(i)),
			WithProbeInterval(10*time.Millisecond), OnCircuitChange(func(_, to Circuit) {
				if to == CircuitOpen {
					opened.Add(1)
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		ls := sluice.NewLeases(f)
		t.Cleanup(func() { _ = ls.Close(); _ = f.Close() })
		fleet, limiters = append(fleet, ls), append(limiters, sluice.New(f))
	}
	in := sluice.InFlight{Limit: limit, Lease: time.Minute}
	var holders, most, admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 31))
			for range 20 {
				i := r.IntN(instances)
				// a rate decision, as a request's rate limits come first: its timeouts open
				// the circuit
				_, _ = limiters[i].Allow(context.Background(), "rate", sluice.PerSecond(1_000_000))
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				s, err := fleet[i].Acquire(ctx, "k", in)
				cancel()
				if err != nil || !s.Admitted {
					continue
				}
				admitted.Add(1)
				n := holders.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Duration(20+r.IntN(40)) * time.Millisecond) // the request's work
				holders.Add(-1)
				_ = s.Release()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d admitted, at most %d held at once (limit %d), circuits opened %d times", admitted.Load(), most.Load(), limit, opened.Load())
	if most.Load() > limit {
		t.Errorf("%d slots held at once, more than max_in_flight %d", most.Load(), limit)
	}
	if admitted.Load() == 0 || opened.Load() == 0 {
		t.Errorf("%d admitted, %d circuit openings: the scenario did not run (want some of each)", admitted.Load(), opened.Load())
	}
}
