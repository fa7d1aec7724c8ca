package simulate

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// Chores is the background work of a mode's instance stores, done in virtual time: every
// Mode.SyncEvery each store that implements sluice.Syncer synchronises, and every
// Mode.ProbeEvery each sluice.Prober probes, at its own instant on the clock, so that a run
// decides the same way every time. Package replay drives its instances with it too. It is not
// safe for concurrent use.
type Chores struct {
	clock                 *sluicetest.ManualClock
	stores                []sluice.Store
	syncEvery, nextSync   int64
	probeEvery, nextProbe int64
}

// NewChores returns the chores of m's stores on clock, the first ones due one interval after
// start (ns).
func NewChores(m Mode, clock *sluicetest.ManualClock, stores []sluice.Store, start int64) *Chores {
	c := &Chores{clock: clock, stores: stores, syncEvery: int64(m.SyncEvery), probeEvery: int64(m.ProbeEvery)}
	c.nextSync, c.nextProbe = start+c.syncEvery, start+c.probeEvery
	return c
}

// RunUntil does the work due up to instant at (ns), the work due first first, each at its own
// instant (syncs before probes at the same instant), and then sets the clock to at. A failed
// sync or probe (the store down) is retried at the next interval.
func (c *Chores) RunUntil(ctx context.Context, at int64) {
	for (c.syncEvery > 0 && c.nextSync <= at) || (c.probeEvery > 0 && c.nextProbe <= at) {
		if c.syncEvery > 0 && (c.probeEvery <= 0 || c.nextSync <= c.nextProbe) {
			c.clock.Set(time.Unix(0, c.nextSync).UTC())
			for _, st := range c.stores {
				if s, ok := st.(sluice.Syncer); ok {
					_ = s.Sync(ctx)
				}
			}
			c.nextSync += c.syncEvery
			continue
		}
		c.clock.Set(time.Unix(0, c.nextProbe).UTC())
		for _, st := range c.stores {
			if p, ok := st.(sluice.Prober); ok {
				_ = p.Probe(ctx)
			}
		}
		c.nextProbe += c.probeEvery
	}
	c.clock.Set(time.Unix(0, at).UTC())
}
