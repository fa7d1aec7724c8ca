package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// RunLeases runs the conformance suite of concurrency limits (sluice.Leaser) on stores made by
// newStore, which must implement it. Times are whole milliseconds of a manual clock, which the
// store must use for lease expiry.
func RunLeases(t *testing.T, newStore NewStore) {
	run := fmt.Sprintf("%08x", rand.Uint32())
	t.Run("AcquireRelease", func(t *testing.T) { testLeaseAcquireRelease(t, newStore, run) })
	t.Run("Expiry", func(t *testing.T) { testLeaseExpiry(t, newStore, run) })
	t.Run("Renew", func(t *testing.T) { testLeaseRenew(t, newStore, run) })
	t.Run("Holdback", func(t *testing.T) { testLeaseHoldback(t, newStore, run) })
	t.Run("BadInput", func(t *testing.T) { testLeaseBadInput(t, newStore, run) })
	t.Run("KeyIsolation", func(t *testing.T) { testLeaseIsolation(t, newStore, run) })
	t.Run("Concurrent", func(t *testing.T) { testLeaseConcurrent(t, newStore, run) })
	t.Run("Model", func(t *testing.T) { testLeaseModel(t, newStore, run) })
}

// leaseFixture is one store and key on a manual clock at Base.
type leaseFixture struct {
	t     *testing.T
	s     sluice.Leaser
	clock *sluicetest.ManualClock
	key   string
	next  uint64
}

func newLeaseFixture(t *testing.T, newStore NewStore, run, name string) *leaseFixture {
	clock := sluicetest.NewManualClock(Base)
	s, ok := newStore(t, clock).(sluice.Leaser)
	if !ok {
		t.Fatal("the store does not implement sluice.Leaser")
	}
	return &leaseFixture{t: t, s: s, clock: clock, key: "storetest:" + run + ":lease:" + name}
}

// id returns a fresh lease id (high bytes from the run, so no two fixtures share one).
func (f *leaseFixture) id() sluice.LeaseID {
	f.next++
	var id sluice.LeaseID
	copy(id[:], f.key)
	id[15] = byte(f.next)
	id[14] = byte(f.next >> 8)
	return id
}

func (f *leaseFixture) acquire(limit sluice.InFlight, holdback int64) (sluice.LeaseID, sluice.LeaseDecision) {
	f.t.Helper()
	id := f.id()
	d, err := f.s.AcquireLease(context.Background(), sluice.LeaseRequest{Key: f.key, InFlight: limit, ID: id, Holdback: holdback})
	if err != nil {
		f.t.Fatalf("acquire: %v", err)
	}
	return id, d
}

func (f *leaseFixture) release(id sluice.LeaseID) {
	f.t.Helper()
	if err := f.s.ReleaseLease(context.Background(), f.key, id); err != nil {
		f.t.Fatalf("release: %v", err)
	}
}

func (f *leaseFixture) renew(lease time.Duration, ids ...sluice.LeaseID) []bool {
	f.t.Helper()
	batch := make([]sluice.LeaseRenewal, len(ids))
	for i, id := range ids {
		batch[i] = sluice.LeaseRenewal{Key: f.key, ID: id, Lease: lease}
	}
	if err := f.s.RenewLeases(context.Background(), batch); err != nil {
		f.t.Fatalf("renew: %v", err)
	}
	held := make([]bool, len(ids))
	for i, r := range batch {
		if r.Err != nil {
			f.t.Fatalf("renew item %d: %v", i, r.Err)
		}
		held[i] = r.Held
	}
	return held
}

func admitted(limit, inFlight, remaining int64) sluice.LeaseDecision {
	return sluice.LeaseDecision{Admitted: true, Capacity: limit, InFlight: inFlight, Remaining: remaining}
}

func refused(limit, inFlight, remaining int64, retry time.Duration) sluice.LeaseDecision {
	return sluice.LeaseDecision{Capacity: limit, InFlight: inFlight, Remaining: remaining, RetryAfter: retry}
}

func (f *leaseFixture) want(step string, got, want sluice.LeaseDecision) {
	f.t.Helper()
	if got != want {
		f.t.Errorf("%s:\n got  %+v\n want %+v", step, got, want)
	}
}

// testLeaseAcquireRelease: at most Limit held; a release frees a slot once, and releasing a
// lease twice, or one never acquired, frees nothing.
func testLeaseAcquireRelease(t *testing.T, newStore NewStore, run string) {
	f := newLeaseFixture(t, newStore, run, "acquire")
	limit := sluice.InFlight{Limit: 2, Lease: time.Second}
	a, d := f.acquire(limit, 0)
	f.want("first", d, admitted(2, 1, 1))
	f.clock.Advance(100 * ms)
	b, d := f.acquire(limit, 0)
	f.want("second", d, admitted(2, 2, 0))
	f.clock.Advance(100 * ms)
	_, d = f.acquire(limit, 0)
	f.want("third, refused until the first lease expires", d, refused(2, 2, 0, 800*ms))
	f.release(a)
	c, d := f.acquire(limit, 0)
	f.want("after a release", d, admitted(2, 2, 0))
	f.release(a) // a second release frees nothing
	f.release(f.id())
	_, d = f.acquire(limit, 0)
	f.want("after a double release and a release of an unknown id", d, refused(2, 2, 0, 900*ms))
	f.release(b)
	f.release(c)
	_, d = f.acquire(limit, 0)
	f.want("after releasing all", d, admitted(2, 1, 1))
}

// testLeaseExpiry: an unrenewed lease stops counting at its expiry, to the millisecond, and a
// release after expiry does not free the slot that went to someone else.
func testLeaseExpiry(t *testing.T, newStore NewStore, run string) {
	f := newLeaseFixture(t, newStore, run, "expiry")
	limit := sluice.InFlight{Limit: 1, Lease: time.Second}
	old, _ := f.acquire(limit, 0)
	f.clock.Advance(999 * ms)
	_, d := f.acquire(limit, 0)
	f.want("1 ms before expiry", d, refused(1, 1, 0, ms))
	f.clock.Advance(ms)
	_, d = f.acquire(limit, 0)
	f.want("at expiry", d, admitted(1, 1, 0))
	f.release(old) // late: must not free the new holder's slot
	_, d = f.acquire(limit, 0)
	f.want("after the expired lease's release", d, refused(1, 1, 0, time.Second))
}

// testLeaseRenew: a renewal moves a live lease's expiry; an expired or released lease is
// reported not held and is not brought back.
func testLeaseRenew(t *testing.T, newStore NewStore, run string) {
	f := newLeaseFixture(t, newStore, run, "renew")
	limit := sluice.InFlight{Limit: 1, Lease: time.Second}
	a, _ := f.acquire(limit, 0)
	f.clock.Advance(600 * ms)
	if held := f.renew(time.Second, a); !held[0] {
		t.Fatal("a live lease was not renewed")
	}
	f.clock.Advance(900 * ms) // 1.5 s after the acquire, 0.9 s after the renewal
	_, d := f.acquire(limit, 0)
	f.want("after the renewal", d, refused(1, 1, 0, 100*ms))
	f.clock.Advance(100 * ms)
	b, d := f.acquire(limit, 0)
	f.want("the renewed lease expired", d, admitted(1, 1, 0))
	if held := f.renew(time.Second, a, b); held[0] || !held[1] {
		t.Fatalf("renew(expired, live) = %v, want [false true]", held)
	}
	_, d = f.acquire(limit, 0)
	f.want("the expired lease was not brought back", d, refused(1, 1, 0, time.Second))
	f.release(b)
	if held := f.renew(time.Second, b); held[0] {
		t.Fatal("a released lease was renewed")
	}
	_, d = f.acquire(limit, 0)
	f.want("the released lease was not brought back", d, admitted(1, 1, 0))
}

// testLeaseHoldback: with a holdback, a request is admitted only while the holdback stays free;
// a holdback of the whole limit can never be admitted.
func testLeaseHoldback(t *testing.T, newStore NewStore, run string) {
	f := newLeaseFixture(t, newStore, run, "holdback")
	limit := sluice.InFlight{Limit: 10, Lease: time.Second}
	sheddable := sluice.DefaultShares.Holdback(sluice.Sheddable, 10) // 5
	for i := int64(1); i <= 5; i++ {
		_, d := f.acquire(limit, sheddable)
		f.want(fmt.Sprintf("sheddable %d", i), d, admitted(10, i, 5-i))
	}
	_, d := f.acquire(limit, sheddable)
	f.want("sheddable past its share", d, refused(10, 5, 0, time.Second))
	_, d = f.acquire(limit, 1)
	f.want("critical", d, admitted(10, 6, 3))
	_, d = f.acquire(limit, 10)
	f.want("a holdback of the whole limit", d, refused(10, 6, 0, sluice.Never))
	_, d = f.acquire(limit, 0)
	f.want("critical plus", d, admitted(10, 7, 3))
}

// testLeaseBadInput: invalid requests are errors naming the field, and touch nothing.
func testLeaseBadInput(t *testing.T, newStore NewStore, run string) {
	f := newLeaseFixture(t, newStore, run, "bad")
	ctx := context.Background()
	ok := sluice.InFlight{Limit: 1, Lease: time.Second}
	for _, c := range []struct {
		req   sluice.LeaseRequest
		field string
	}{
		{sluice.LeaseRequest{Key: "", InFlight: ok}, "key"},
		{sluice.LeaseRequest{Key: f.key, InFlight: sluice.InFlight{Limit: 0}}, "max_in_flight"},
		{sluice.LeaseRequest{Key: f.key, InFlight: sluice.InFlight{Limit: -3}}, "max_in_flight"},
		{sluice.LeaseRequest{Key: f.key, InFlight: sluice.InFlight{Limit: 1, Lease: -time.Second}}, "lease"},
		{sluice.LeaseRequest{Key: f.key, InFlight: sluice.InFlight{Limit: 1, Lease: time.Microsecond}}, "lease"},
		{sluice.LeaseRequest{Key: f.key, InFlight: ok, Holdback: 2}, "holdback"},
		{sluice.LeaseRequest{Key: f.key, InFlight: ok, Holdback: -1}, "holdback"},
	} {
		c.req.ID = f.id()
		_, err := f.s.AcquireLease(ctx, c.req)
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: error %v, want a FieldError on %q", c.req, err, c.field)
		}
	}
	batch := []sluice.LeaseRenewal{{Key: f.key, ID: f.id(), Lease: 0}, {Key: "", ID: f.id(), Lease: time.Second}}
	if err := f.s.RenewLeases(ctx, batch); err != nil {
		t.Fatalf("renew: %v", err)
	}
	for i, field := range []string{"lease", "key"} {
		var fe *sluice.FieldError
		if !errors.As(batch[i].Err, &fe) || fe.Field != field || batch[i].Held {
			t.Errorf("renew item %d: held %v, error %v, want a FieldError on %q", i, batch[i].Held, batch[i].Err, field)
		}
	}
	_, d := f.acquire(ok, 0)
	f.want("after the bad requests", d, admitted(1, 1, 0))
}

// testLeaseIsolation: keys do not share slots, and a lease id released on another key frees
// nothing.
func testLeaseIsolation(t *testing.T, newStore NewStore, run string) {
	f := newLeaseFixture(t, newStore, run, "iso-a")
	g := &leaseFixture{t: t, s: f.s, clock: f.clock, key: f.key + "-b", next: 1000}
	limit := sluice.InFlight{Limit: 1, Lease: time.Second}
	a, _ := f.acquire(limit, 0)
	_, d := g.acquire(limit, 0)
	g.want("another key", d, admitted(1, 1, 0))
	g.release(a) // a's id on the wrong key
	_, d = f.acquire(limit, 0)
	f.want("after releasing its id on another key", d, refused(1, 1, 0, time.Second))
}

// testLeaseConcurrent: many goroutines acquiring and releasing never hold more than the
// limit, and every slot comes back.
func testLeaseConcurrent(t *testing.T, newStore NewStore, run string) {
	f := newLeaseFixture(t, newStore, run, "concurrent")
	limit := sluice.InFlight{Limit: 5, Lease: time.Minute}
	var held, peak, admits atomic.Int64
	var ids atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				var id sluice.LeaseID
				copy(id[:], f.key)
				n := ids.Add(1)
				id[13], id[14], id[15] = byte(g), byte(n>>8), byte(n)
				d, err := f.s.AcquireLease(context.Background(), sluice.LeaseRequest{Key: f.key, InFlight: limit, ID: id})
				if err != nil {
					errs <- err
					return
				}
				if !d.Admitted {
					continue
				}
				admits.Add(1)
				h := held.Add(1)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				held.Add(-1)
				if err := f.s.ReleaseLease(context.Background(), f.key, id); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if peak.Load() > limit.Limit || admits.Load() == 0 {
		t.Errorf("peak in flight %d (limit %d), %d admitted", peak.Load(), limit.Limit, admits.Load())
	}
	_, d := f.acquire(limit, 0)
	f.want("after everyone released", d, admitted(5, 1, 4))
}
