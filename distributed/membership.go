package distributed

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// membership counts the live instances of a Fallback's group, for the share of each rule this
// instance may admit while the store is down (fraction): with heartbeats in the store when it
// is a sluice.Heartbeater (the last count is kept while it does not answer), else the count
// WithInstances gave; WithSafeCapacity overrides both. It is safe for concurrent use once
// built.
type membership struct {
	registry  sluice.Heartbeater // the store, when it counts instances; else nil
	clock     sluice.Clock
	group, id string
	interval  time.Duration // between heartbeats; a heartbeat lives three
	timeout   time.Duration
	safe      float64         // WithSafeCapacity, 0 when unset
	stop      <-chan struct{} // closed by the Fallback's Close: a heartbeat in flight is abandoned

	instances atomic.Int64
	lastBeat  atomic.Int64 // clock instant (Unix ns) of the last successful heartbeat
}

// counts reports whether the store counts the instances (heartbeats).
func (m *membership) counts() bool { return m.registry != nil }

// due reports whether a heartbeat is due: the store counts instances and a heartbeat interval
// of the clock has passed since the last successful one.
func (m *membership) due() bool {
	return m.registry != nil && m.clock.Now().UnixNano()-m.lastBeat.Load() >= int64(m.interval)
}

// beat announces the instance and updates the count, bounded by the timeout in real time
// (in its own goroutine, so a store that ignores its context cannot hold it); on failure the
// last count stays.
func (m *membership) beat(ctx context.Context) error {
	_, err := within(ctx, m.timeout, m.stop, func(ctx context.Context) (sluice.Decision, error) {
		n, err := m.registry.Heartbeat(ctx, m.group, m.id, 3*m.interval)
		if err == nil && n > 0 {
			m.instances.Store(int64(n))
		}
		return sluice.Decision{}, err
	})
	if err == nil {
		m.lastBeat.Store(m.clock.Now().UnixNano())
	}
	return err
}

// fraction is this instance's share of each rule by the count: the safe capacity when set,
// else 1 / live instances.
func (m *membership) fraction() float64 {
	if m.safe > 0 {
		return m.safe
	}
	return 1 / float64(max(1, m.instances.Load()))
}
