package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/simulate"
)

// simulateCriticality runs `sluice simulate -scenario criticality`: one key at 2x its limit
// with a class mix, the admitted fraction per class and algorithm, on the stores open returns
// (nil: memory; see simulateStore).
func simulateCriticality(stdout, stderr io.Writer, open func(sluice.Clock) (sluice.Store, io.Closer, error), d time.Duration, seed uint64) int {
	if d <= 0 {
		d = 60 * time.Second
	}
	rows, err := simulate.RunCriticalityOn(context.Background(), open, sluice.Algorithms(), 2, d, seed)
	if err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "criticality: one key at 2x its limit of 100/s for %v, classes CRITICAL_PLUS 10%%, CRITICAL 30%%, SHEDDABLE_PLUS 30%%, SHEDDABLE 30%%, default shares\n\n", d)
	if err := simulate.WriteClassTable(stdout, rows); err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 1
	}
	return 0
}
