package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

func init() {
	register(command{name: "demo", summary: "limit a burst of requests in memory and print the decisions", run: runDemo})
}

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	algo := fs.String("algorithm", "token_bucket", "algorithm name")
	limit := fs.Int64("limit", 5, "units per period")
	period := fs.Duration("period", time.Second, "period")
	requests := fs.Int("requests", 8, "requests in the burst")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	a, err := sluice.ParseAlgorithm(*algo)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	rule := sluice.Rule{Algorithm: a, Limit: *limit, Period: *period}
	if err := rule.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	store, err := memory.New()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer store.Close()
	lim := sluice.New(store)
	fmt.Fprintf(stdout, "rule: %s\n", rule)
	for i := 1; i <= *requests; i++ {
		d, err := lim.Allow(context.Background(), "demo", rule)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stdout, "request %2d: allowed=%-5v remaining=%d retry_after=%v reset_after=%v\n",
			i, d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter.Round(time.Millisecond))
	}
	return 0
}
