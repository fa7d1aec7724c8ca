package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// leaseModel is the reference of a key's leases: live ids and their expiries (ns since Base).
type leaseModel struct {
	exp map[sluice.LeaseID]int64
}

func (m *leaseModel) live(now int64) (n, soonest int64) {
	for id, e := range m.exp {
		if e <= now {
			delete(m.exp, id)
			continue
		}
		if n == 0 || e < soonest {
			soonest = e
		}
		n++
	}
	return n, soonest
}

// testLeaseModel plays random sequences of acquires (with random holdbacks), releases (of live,
// released and expired leases), batched renewals, clears of the key (when the store is a
// sluice.LeaseClearer) and clock steps against a store and the model, checking every
// decision, renewal and clear, so in flight never exceeds the limit, a release is idempotent,
// and neither an expired nor a cleared lease ever comes back.
func testLeaseModel(t *testing.T, newStore NewStore, run string) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			f := newLeaseFixture(t, newStore, run, fmt.Sprint("model-", seed))
			rng := rand.New(rand.NewPCG(seed, 24))
			limit := sluice.InFlight{Limit: 1 + rng.Int64N(4), Lease: time.Duration(1+rng.IntN(5)) * 100 * ms}
			m := &leaseModel{exp: map[sluice.LeaseID]int64{}}
			var ids []sluice.LeaseID
			for step := range 300 {
				now := int64(f.clock.Now().Sub(Base))
				switch op := rng.IntN(10); {
				case op < 4:
					holdback := rng.Int64N(limit.Limit + 1)
					if rng.IntN(2) == 0 {
						holdback = 0
					}
					n, soonest := m.live(now)
					want := modelDecision(limit.Limit, holdback, n, soonest, now)
					id, got := f.acquire(limit, holdback)
					if got != want {
						t.Fatalf("step %d: acquire(holdback %d) at %v: got %+v, want %+v", step, holdback, time.Duration(now), got, want)
					}
					if got.Admitted {
						m.exp[id] = now + int64(limit.Lease)
						ids = append(ids, id)
					}
				case op < 6 && len(ids) > 0:
					id := ids[rng.IntN(len(ids))]
					f.release(id)
					delete(m.exp, id)
				case op == 8 && rng.IntN(4) == 0:
					c, ok := f.s.(sluice.LeaseClearer)
					if !ok {
						continue
					}
					want, _ := m.live(now)
					got, err := c.ClearLeases(context.Background(), f.key)
					if err != nil || got != want {
						t.Fatalf("step %d: clear at %v: %d, %v; want %d live leases cleared", step, time.Duration(now), got, err, want)
					}
					clear(m.exp)
				case op < 8 && len(ids) > 0:
					pick := make([]sluice.LeaseID, 1+rng.IntN(min(len(ids), 4)))
					for i := range pick {
						pick[i] = ids[rng.IntN(len(ids))]
					}
					m.live(now)
					held := f.renew(limit.Lease, pick...)
					for i, id := range pick {
						_, want := m.exp[id]
						if held[i] != want {
							t.Fatalf("step %d: renew of lease %d at %v: held %v, want %v", step, i, time.Duration(now), held[i], want)
						}
						if want {
							m.exp[id] = now + int64(limit.Lease)
						}
					}
				default:
					f.clock.Advance(time.Duration(rng.IntN(300)) * ms)
				}
			}
		})
	}
}

// modelDecision is the decision the model expects, from its definition: admitted when, after
// it, the holdback stays free; otherwise RetryAfter until the soonest expiry, or Never.
func modelDecision(limit, holdback, live, soonest, now int64) sluice.LeaseDecision {
	room := limit - holdback
	if live+1 <= room {
		return sluice.LeaseDecision{Admitted: true, Capacity: limit, InFlight: live + 1, Remaining: room - live - 1}
	}
	d := sluice.LeaseDecision{Capacity: limit, InFlight: live, Remaining: max(0, room-live), RetryAfter: time.Duration(soonest - now)}
	if room < 1 {
		d.RetryAfter = sluice.Never
	}
	return d
}
