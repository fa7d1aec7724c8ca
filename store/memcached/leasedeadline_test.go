package memcached_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/memcached"
)

// TestLeaseCallsHonourDeadline (issue 31 item 9): with memcached stopped (SIGSTOP: it keeps
// its connections and the kernel accepts new ones, but nothing answers), every lease call
// returns by its context's deadline, failed with ErrStoreUnavailable, never admitted, however
// many callers queue on one key. Before, they took turns each up to the store's timeout: 8
// acquires with a 150 ms deadline returned after 251-953 ms, some admitted past it.
// Property: random deadlines (50-300 ms) for 24 concurrent acquires, renewals and releases on
// two keys, against a store timeout of 3 s.
func TestLeaseCallsHonourDeadline(t *testing.T) {
	testenv.Timing(t)
	own := testenv.StartMemcached(t)
	s := newStore(t, []string{own.Addr()}, memcached.WithTimeout(3*time.Second))
	limit := sluice.InFlight{Limit: 100, Lease: time.Minute}
	var held sluice.LeaseID
	held[0] = 1
	if d, err := s.AcquireLease(context.Background(), sluice.LeaseRequest{Key: "k0", InFlight: limit, ID: held}); err != nil || !d.Admitted {
		t.Fatalf("before the stop: %+v, %v", d, err)
	}
	own.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { own.Signal(syscall.SIGCONT) })
	// What the deadline may be overrun by: scheduling on a loaded machine, far below the
	// store's timeout that bounded every queued caller before.
	const slack = 500 * time.Millisecond
	r := rand.New(rand.NewPCG(31, 9))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration // the longest a call ran past its deadline
	for i := range 24 {
		deadline := 50*time.Millisecond + time.Duration(r.IntN(250))*time.Millisecond
		key := []string{"k0", "k1"}[i%2]
		var id sluice.LeaseID
		id[0], id[1] = 2, byte(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			var err error
			what := []string{"acquire", "renew", "release"}[i%3]
			switch what {
			case "acquire":
				var d sluice.LeaseDecision
				d, err = s.AcquireLease(ctx, sluice.LeaseRequest{Key: key, InFlight: limit, ID: id})
				if d.Admitted {
					t.Errorf("%s %d admitted with the server stopped", what, i)
				}
			case "renew":
				batch := []sluice.LeaseRenewal{{Key: key, ID: held, Lease: time.Minute}, {Key: "k2", ID: id, Lease: time.Minute}}
				err = s.RenewLeases(ctx, batch)
				if err == nil && (batch[0].Err == nil || batch[0].Held) {
					err = batch[0].Err
				}
			case "release":
				err = s.ReleaseLease(ctx, key, held)
			}
			elapsed := time.Since(start)
			mu.Lock()
			worst = max(worst, elapsed-deadline)
			mu.Unlock()
			if !errors.Is(err, sluice.ErrStoreUnavailable) {
				t.Errorf("%s %d: %v, want ErrStoreUnavailable", what, i, err)
			}
			if elapsed > deadline+slack {
				t.Errorf("%s %d returned after %v, its deadline %v", what, i, elapsed.Round(time.Millisecond), deadline)
			}
		}()
	}
	wg.Wait()
	t.Logf("24 calls, deadlines 50-300 ms, store timeout 3 s: the latest returned %v after its deadline", worst.Round(time.Millisecond))
}
