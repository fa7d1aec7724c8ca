package bench

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
	"golang.org/x/sync/semaphore"
)

// BenchmarkInFlight measures one acquire and its release of a concurrency limit in memory:
// Sluice's Leases.Acquire (a lease in the memory store, registered for renewal) against
// golang.org/x/sync/semaphore's Weighted (one process, no lease), on one key from one
// goroutine and from parallel goroutines, with a limit high enough that nothing waits.
//
//	cd bench && for i in $(seq 5); do go test -run '^$' -bench 'InFlight/' -benchmem; done | tee inflight.txt
func BenchmarkInFlight(b *testing.B) {
	const limit = 1 << 20
	ctx := context.Background()
	b.Run("sluice", func(b *testing.B) {
		s, err := memory.New()
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		l := sluice.NewLeases(s)
		defer l.Close()
		in := sluice.InFlight{Limit: limit, Lease: time.Minute}
		cycle := func() {
			slot, err := l.Acquire(ctx, "report:tenant-1", in)
			if err != nil || !slot.Admitted {
				b.Fatal(slot, err)
			}
			_ = slot.Release()
		}
		serialAndParallel(b, cycle)
	})
	b.Run("x-sync-semaphore", func(b *testing.B) {
		sem := semaphore.NewWeighted(limit)
		cycle := func() {
			if err := sem.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			sem.Release(1)
		}
		serialAndParallel(b, cycle)
	})
}

// serialAndParallel runs cycle from one goroutine, then from GOMAXPROCS goroutines.
func serialAndParallel(b *testing.B, cycle func()) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cycle()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				cycle()
			}
		})
	})
}
