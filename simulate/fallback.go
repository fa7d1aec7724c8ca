package simulate

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
)

// Fallback probe and heartbeat intervals in virtual time, and the real-time bound of a store
// call (the simulated stores answer at once; Redis within it).
const (
	FallbackProbeInterval = time.Second
	FallbackHeartbeat     = time.Second
	fallbackTimeout       = time.Second
)

// Fallback returns a fallback mode: nodes instances, each a distributed.Fallback with the
// given policy over the shared store, which is down for the middle third of the run and
// answers again in the last third. The circuit opens at the first failure. Every instance
// announces itself with heartbeats in the shared store (so the local policy's share is the
// rule's limit divided by the live instances it counted) and, while the store is down, probes
// it; both run on the harness's virtual clock (WithManualProbe, driven every
// FallbackProbeInterval), so the switch back to the store happens at the first probe after
// the outage, deterministically.
func Fallback(nodes int, routing Routing, policy distributed.FailurePolicy) Mode {
	name := "fallback"
	if policy != distributed.FailLocal {
		name += "_" + policy.String()
	}
	return Mode{Name: name, Nodes: nodes, Routing: routing, Outage: Outage{From: 1.0 / 3, To: 2.0 / 3},
		ProbeEvery: FallbackProbeInterval,
		Build: func(shared sluice.Store, clock sluice.Clock, node int) (sluice.Store, error) {
			return distributed.NewFallback(shared, distributed.WithClock(clock),
				distributed.WithFailurePolicy(policy), distributed.WithFailures(1),
				distributed.WithTimeout(fallbackTimeout), distributed.WithManualProbe(),
				distributed.WithProbeInterval(FallbackProbeInterval),
				distributed.WithHeartbeat(FallbackHeartbeat),
				distributed.WithInstanceID(fmt.Sprint("node-", node)))
		}}
}
