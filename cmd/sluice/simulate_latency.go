package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/simulate"
)

// simulateLatency runs `sluice simulate -scenario latency_spike`: a backend that slows down
// 5x for the middle third of the run, behind a rate limit alone, a fixed in-flight limit and
// the adaptive limit, each phase's admitted requests, latency and queueing.
func simulateLatency(stdout, stderr io.Writer, d time.Duration, seed uint64) int {
	if d < 0 {
		fmt.Fprintf(stderr, "sluice simulate: duration: must not be negative, got %v\n", d)
		return 2
	}
	if d == 0 {
		d = 60 * time.Second
	}
	rows, err := simulate.RunLatency(context.Background(), d, seed)
	if err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "latency_spike: 400 requests/s for %v to a backend of 40 workers, 50 ms a request, 250 ms in the middle third; a rate limit of 500/s alone, with max_in_flight 40, with the adaptive limit\n\n", d)
	if err := simulate.WriteLatencyTable(stdout, rows); err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 1
	}
	return 0
}
