package simulate

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
)

// Fallback returns a fallback mode: nodes instances, each a distributed.Fallback with the
// given policy over the shared store, which is down for the middle third of the run. The
// circuit opens at the first failure. Each instance is told the fleet size (WithInstances),
// because the simulated shared store does not count instances while it is behind the outage
// wrapper.
//
// Recovery is not simulated: distributed.Fallback probes the store on the wall clock, not on
// its injected clock, so a probe cannot be placed deterministically in virtual time. The probe
// interval is set beyond any run, and an instance stays in fallback from the outage to the end
// of the run. Store calls are bounded by a wall-clock timeout, set to an hour for the same
// reason.
func Fallback(nodes int, routing Routing, policy distributed.Policy) Mode {
	name := "fallback"
	if policy != distributed.PolicyLocal {
		name += "_" + policy.String()
	}
	return Mode{Name: name, Nodes: nodes, Routing: routing, Outage: Outage{From: 1.0 / 3, To: 2.0 / 3},
		Build: func(shared sluice.Store, clock sluice.Clock, _ int) (sluice.Store, error) {
			return distributed.NewFallback(shared, distributed.WithFallbackClock(clock),
				distributed.WithPolicy(policy), distributed.WithInstances(nodes),
				distributed.WithFailures(1), distributed.WithTimeout(time.Hour),
				distributed.WithProbeInterval(365*24*time.Hour))
		}}
}
