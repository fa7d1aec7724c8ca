package main

import (
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/simulate"
)

// simulateScaleUp runs the quota scale-up scenario (clients joining a quota bucket) with a
// 1 s and a 30 s TTL, on one server and on two replicas, and prints one row per join.
func simulateScaleUp(stdout, stderr io.Writer) int {
	var rows []simulate.ScaleUpJoin
	for _, ttl := range []time.Duration{time.Second, 30 * time.Second} {
		for _, replicas := range []int{1, 2} {
			rows = append(rows, simulate.QuotaScaleUp(ttl, replicas)...)
		}
	}
	if err := simulate.WriteScaleUp(stdout, rows); err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 1
	}
	return 0
}
