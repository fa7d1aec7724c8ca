package simulate

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
)

// OverLimit returns the over-limit mode (`sluice serve --mode overlimit`): nodes instances,
// each a distributed.OverLimit over the shared store on the run's virtual clock, so that a
// cached denial expires at its RetryAfter in virtual time. Its allows are the store's, so its
// accuracy is sync mode's; what it saves is store calls.
func OverLimit(nodes int, routing Routing) Mode {
	return Mode{Name: "overlimit", Nodes: nodes, Routing: routing,
		Build: func(shared sluice.Store, clock sluice.Clock, _ int) (sluice.Store, error) {
			return distributed.NewOverLimit(shared, distributed.WithClock(clock))
		}}
}
