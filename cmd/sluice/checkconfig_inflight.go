package main

import (
	"fmt"

	"github.com/sluicehq/sluice/config"
)

// inFlightNote is check-config's note on the rules' max_in_flight limits: how many, and who
// enforces them; empty when there are none.
func inFlightNote(c *config.Config) string {
	n := 0
	for _, l := range c.Limits() {
		if l.InFlight != nil {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d max_in_flight (enforced by sluice proxy and the middleware; sluice serve refuses them)", n)
}
