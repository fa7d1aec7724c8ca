package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

func init() {
	register(command{name: "demo", summary: "limit a burst of requests in memory and print the decisions", run: runDemo})
}

var demoHelp = help{
	synopsis: "sluice demo [flags]",
	description: `
Sends a burst of requests for one key through a rule, in memory, all at the same instant,
and prints each decision: allowed or not, what remains, and how long until a retry can
pass (retry_after) and until the key is back to its full limit (reset_after).`,
	groups: []flagGroup{
		{"Rule", []string{"algorithm", "limit", "period", "burst"}},
		{"Burst", []string{"requests"}},
	},
	examples: []string{
		"sluice demo",
		"sluice demo --algorithm gcra --limit 3 --period 1s --requests 5",
	},
}

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	algo := fs.String("algorithm", "token_bucket", "algorithm: "+algorithmList())
	limit := fs.Int64("limit", 5, "units per period")
	period := fs.Duration("period", time.Second, "the rule's period, e.g. 1s, 1m, 1h30m")
	burst := fs.Int64("burst", 0, "bucket size of token_bucket, leaky_bucket and gcra (0: the limit)")
	requests := fs.Int("requests", 8, "requests in the burst")
	if code, done := parseFlags("demo", fs, &demoHelp, args, stdout, stderr); done {
		return code
	}
	a, err := sluice.ParseAlgorithm(*algo)
	if err != nil {
		fmt.Fprintf(stderr, "sluice demo: --algorithm: %v (want %s)\n", err, algorithmList())
		return 2
	}
	if *requests < 1 {
		fmt.Fprintf(stderr, "sluice demo: --requests: must be positive, got %d\n", *requests)
		return 2
	}
	rule := sluice.Rule{Algorithm: a, Limit: *limit, Period: *period, Burst: *burst}
	if err := rule.Validate(); err != nil {
		fmt.Fprintln(stderr, "sluice demo:", err)
		return 2
	}
	clock := sluicetest.NewManualClock(time.Now()) // never advanced: the burst is at one instant
	store, err := memory.New(memory.WithClock(clock))
	if err != nil {
		fmt.Fprintln(stderr, "sluice demo:", err)
		return 1
	}
	defer store.Close()
	lim := sluice.New(store, sluice.WithClock(clock))
	fmt.Fprintf(stdout, "rule: %s\n", rule)
	for i := 1; i <= *requests; i++ {
		d, err := lim.Allow(context.Background(), "demo", rule)
		if err != nil {
			fmt.Fprintln(stderr, "sluice demo:", err)
			return 1
		}
		fmt.Fprintf(stdout, "request %2d: allowed=%-5v remaining=%d retry_after=%v reset_after=%v\n",
			i, d.Allowed, d.Remaining, humanDuration(d.RetryAfter), humanDuration(d.ResetAfter))
	}
	return 0
}

// humanDuration rounds d for people: to the millisecond under a minute (333ms, 1.5s), to the
// second beyond.
func humanDuration(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

func algorithmList() string {
	names := make([]string, 0, len(sluice.Algorithms()))
	for _, a := range sluice.Algorithms() {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}
