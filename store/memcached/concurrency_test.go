package memcached_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memcached"
)

// hammer sends each requests of one unit for key under rule from each of goroutines spread
// over limiters, and returns how many were admitted and the errors.
func hammer(limiters []*sluice.Limiter, goroutines, each int, key string, rule sluice.Rule) (admitted int64, errs []error) {
	var n atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := limiters[g%len(limiters)]
			for i := 0; i < each; i++ {
				d, err := l.Allow(context.Background(), key, rule)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				if d.Allowed {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return n.Load(), errs
}

func rules(limit int64) []sluice.Rule {
	var out []sluice.Rule
	for _, a := range sluice.Algorithms() {
		out = append(out, sluice.Rule{Algorithm: a, Limit: limit, Period: time.Hour})
	}
	return append(out, sluice.SlidingWindow(limit, time.Hour, 4))
}

// TestHotKeyExact: 64 goroutines send 5L requests on one key; exactly L are admitted, for
// every algorithm (clock frozen), and the coalescing makes far fewer rounds than decisions.
func TestHotKeyExact(t *testing.T) {
	const limit, goroutines = 100, 64
	for _, r := range rules(limit) {
		t.Run(r.String(), func(t *testing.T) {
			s := newStore(t, []string{server(t)}, memcached.WithClock(sluicetest.NewManualClock(t0)))
			admitted, errs := hammer([]*sluice.Limiter{sluice.New(s)}, goroutines, 5*limit/goroutines+1, "hot", r)
			if len(errs) > 0 {
				t.Fatalf("%d errors, first: %v", len(errs), errs[0])
			}
			if admitted != limit {
				t.Errorf("admitted %d, want exactly %d", admitted, limit)
			}
			st := s.Stats()
			t.Logf("%+v", st)
			if st.CASConflicts != 0 {
				t.Errorf("%d CAS conflicts in one process: its decisions on a key never race", st.CASConflicts)
			}
		})
	}
}

// TestTwoLimitersShareLimit: two stores (two processes' worth of clients) sharing one
// memcached admit L in total; their CAS rounds conflict and are retried.
func TestTwoLimitersShareLimit(t *testing.T) {
	const limit = 100
	for _, r := range rules(limit) {
		t.Run(r.String(), func(t *testing.T) {
			clock := sluicetest.NewManualClock(t0)
			p := prefix()
			a := newStore(t, []string{server(t)}, memcached.WithClock(clock), memcached.WithPrefix(p), memcached.WithMaxAttempts(100))
			b := newStore(t, []string{server(t)}, memcached.WithClock(clock), memcached.WithPrefix(p), memcached.WithMaxAttempts(100))
			admitted, errs := hammer([]*sluice.Limiter{sluice.New(a), sluice.New(b)}, 32, 5*limit/32+1, "shared", r)
			if len(errs) > 0 {
				t.Fatalf("%d errors, first: %v", len(errs), errs[0])
			}
			if admitted != limit {
				t.Errorf("admitted %d, want exactly %d", admitted, limit)
			}
			t.Logf("a %+v\nb %+v", a.Stats(), b.Stats())
		})
	}
}

// TestContention: with a retry budget of one round, stores racing on a key fail some
// decisions with a *ContentionError wrapping sluice.ErrStoreUnavailable, and never admit
// more than the limit.
func TestContention(t *testing.T) {
	const limit = 1000
	clock := sluicetest.NewManualClock(t0)
	p := prefix()
	var limiters []*sluice.Limiter
	for range 8 {
		limiters = append(limiters, sluice.New(newStore(t, []string{server(t)}, memcached.WithClock(clock), memcached.WithPrefix(p), memcached.WithMaxAttempts(1))))
	}
	admitted, errs := hammer(limiters, 32, 20, "contended", sluice.TokenBucket(limit, time.Hour, 0))
	if admitted > limit {
		t.Fatalf("admitted %d, more than the limit %d", admitted, limit)
	}
	if len(errs) == 0 {
		t.Fatal("8 stores with one attempt each never lost a round: the test shows nothing")
	}
	for _, err := range errs {
		var ce *memcached.ContentionError
		if !errors.As(err, &ce) || !errors.Is(err, sluice.ErrStoreUnavailable) || ce.Attempts != 1 {
			t.Fatalf("error %v: want a *ContentionError wrapping ErrStoreUnavailable", err)
		}
	}
	t.Logf("%d admitted, %d contention errors", admitted, len(errs))
}
