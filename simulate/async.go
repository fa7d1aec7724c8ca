package simulate

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
)

// Async returns the async mode: nodes instances, each deciding fixed- and sliding-window rules
// on a local view (distributed.Async) synchronised with the shared store every interval of
// virtual time. Other algorithms pass through to the shared store, so they decide as in sync
// mode.
func Async(nodes int, routing Routing, interval time.Duration) Mode {
	return Mode{Name: "async_" + interval.String(), Nodes: nodes, Routing: routing, SyncEvery: interval,
		Build: func(shared sluice.Store, clock sluice.Clock, _ int) (sluice.Store, error) {
			return distributed.NewAsync(shared, distributed.WithClock(clock),
				distributed.WithInterval(interval), distributed.WithManualSync())
		}}
}
