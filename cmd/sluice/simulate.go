package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/simulate"
	"github.com/sluicehq/sluice/store"
)

func init() {
	register(command{name: "simulate", summary: "measure the accuracy of every algorithm and mode on simulated traffic", run: runSimulate})
}

var simulateHelp = help{
	synopsis: "sluice simulate [flags]",
	description: `
Replays seeded traffic in virtual time through each algorithm and mode and prints one row of
accuracy metrics per algorithm and mode (see docs/ACCURACY.md); --out also draws them.`,
	groups: []flagGroup{
		{"Traffic", []string{"scenario", "duration", "seed", "list"}},
		{"What is measured", []string{"algorithms", "modes", "nodes", "routing", "store"}},
		{"Output", []string{"format", "out", "quiet"}},
	},
	examples: []string{
		"sluice simulate --list",
		"sluice simulate --scenario bursty --algorithms token_bucket,gcra --modes single,async --format csv",
	},
}

func runSimulate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	scenarioNames := make([]string, 0, len(simulate.Scenarios()))
	for _, s := range simulate.Scenarios() {
		scenarioNames = append(scenarioNames, s.Name)
	}
	scenarioNames = append(scenarioNames, simulate.CriticalityScenario, simulate.LatencyScenario, simulate.QuotaScaleUpScenario, simulate.RegionsScenario, simulate.LLMBudgetScenario)
	scenario := fs.String("scenario", simulate.Scenarios()[0].Name, "traffic scenario: "+strings.Join(scenarioNames, ", "))
	algorithms := fs.String("algorithms", "all", "comma-separated algorithms (sliding_window_N for N sub-windows), or all")
	modes := fs.String("modes", "single", "comma-separated modes: "+strings.Join(simulate.ModeNames(), ", "))
	nodes := fs.Int("nodes", 4, "instances in distributed modes")
	routing := fs.String("routing", "round_robin", "comma-separated request routings in distributed modes: round_robin, sticky, skewed")
	duration := fs.Duration("duration", 0, "run length in virtual time (0: the scenario's default)")
	seed := fs.Uint64("seed", 1, "random seed of the traffic and of skewed routing")
	format := fs.String("format", "text", "table format: text, csv or json")
	out := fs.String("out", "", "directory to write the PNG and SVG plots to (none when empty)")
	list := fs.Bool("list", false, "list the scenarios with their exact definitions and exit")
	quiet := fs.Bool("quiet", false, "no progress indicator on stderr")
	storeURL := fs.String("store", "memory", "store the instances of distributed modes (and the criticality scenario) share: memory, or a store URL as serve's --store takes, e.g. redis://host:port/db (keys under a fresh sluice-simulate:* prefix per run, client clock)")
	if code, done := parseFlags("simulate", fs, &simulateHelp, args, stdout, stderr); done {
		return code
	}
	if *out != "" && writePlots == nil {
		fmt.Fprintln(stderr, errNoPlots)
		return 2
	}
	if *list {
		for _, s := range simulate.Scenarios() {
			fmt.Fprintf(stdout, "%s: %s\n  %s\n", s.Name, s.Summary, s.Definition)
		}
		fmt.Fprintf(stdout, "%s: %s\n  %s\n", simulate.CriticalityScenario, simulate.CriticalitySummary, simulate.CriticalityDefinition)
		fmt.Fprintf(stdout, "%s: %s\n  %s\n", simulate.LatencyScenario, simulate.LatencySummary, simulate.LatencyDefinition)
		fmt.Fprintf(stdout, "%s: %s\n  %s\n", simulate.QuotaScaleUpScenario, simulate.QuotaScaleUpSummary, simulate.QuotaScaleUpDefinition)
		fmt.Fprintf(stdout, "%s: %s\n  %s\n", simulate.RegionsScenario, simulate.RegionsSummary, simulate.RegionsDefinition)
		fmt.Fprintf(stdout, "%s: %s\n  %s\n", simulate.LLMBudgetScenario, simulate.LLMBudgetSummary, simulate.LLMBudgetDefinition)
		return 0
	}
	if *scenario == simulate.RegionsScenario {
		return simulateRegions(stdout, stderr, *seed, *out)
	}
	if *scenario == simulate.LLMBudgetScenario {
		return simulateLLMBudget(stdout, stderr, *seed, *out)
	}
	if *scenario == simulate.LatencyScenario {
		return simulateLatency(stdout, stderr, *duration, *seed)
	}
	if *scenario == simulate.QuotaScaleUpScenario {
		return simulateScaleUp(stdout, stderr)
	}
	if *scenario == simulate.CriticalityScenario {
		var cfg simulate.Config
		if err := simulateStore(&cfg, *storeURL); err != nil {
			fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
			return 2
		}
		return simulateCriticality(stdout, stderr, cfg.Store, *duration, *seed)
	}
	cfg, err := simulateConfig(*scenario, *algorithms, *modes, *routing, *format, *nodes, *duration, *seed)
	if err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 2
	}
	if err := simulateStore(&cfg, *storeURL); err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 2
	}
	if !*quiet {
		cfg.Progress = progressPrinter(stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := simulate.Run(ctx, cfg)
	if !*quiet {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 1
	}
	if err := simulate.WriteTable(stdout, res.Rows, *format); err != nil {
		fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
		return 1
	}
	if *out != "" {
		return wrote(stderr)(writePlots(*out, res))
	}
	return 0
}

// wrote returns what reports the figures written (or the failure) on stderr, and the
// command's exit code.
func wrote(stderr io.Writer) func(paths []string, err error) int {
	return func(paths []string, err error) int {
		if err != nil {
			fmt.Fprintf(stderr, "sluice simulate: %v\n", err)
			return 1
		}
		for _, p := range paths {
			fmt.Fprintf(stderr, "wrote %s\n", p)
		}
		return 0
	}
}

func simulateConfig(scenario, algorithms, modes, routing, format string, nodes int, duration time.Duration, seed uint64) (simulate.Config, error) {
	sc, err := simulate.ScenarioByName(scenario)
	if err != nil {
		return simulate.Config{}, err
	}
	variants, err := simulate.ParseVariants(algorithms)
	if err != nil {
		return simulate.Config{}, err
	}
	var routings []simulate.Routing
	for _, name := range strings.Split(routing, ",") {
		r, err := simulate.ParseRouting(strings.TrimSpace(name))
		if err != nil {
			return simulate.Config{}, err
		}
		routings = append(routings, r)
	}
	ms, err := simulate.ParseModes(modes, nodes, routings)
	if err != nil {
		return simulate.Config{}, err
	}
	valid := false
	for _, f := range simulate.Formats {
		valid = valid || f == format
	}
	if !valid {
		return simulate.Config{}, fmt.Errorf("format: unknown %q (want text, csv or json)", format)
	}
	if duration < 0 {
		return simulate.Config{}, fmt.Errorf("duration: must not be negative, got %v", duration)
	}
	return simulate.Config{Scenario: sc, Duration: duration, Seed: seed, Variants: variants, Modes: ms}, nil
}

// progressPrinter rewrites one status line on w, at most ten times a second.
func progressPrinter(w io.Writer) func(done, total int64) {
	var last time.Time
	return func(done, total int64) {
		if now := time.Now(); done < total && now.Sub(last) < 100*time.Millisecond {
			return
		} else {
			last = now
		}
		fmt.Fprintf(w, "\rsimulate: %3d%% (%d/%d decisions)", done*100/max(1, total), done, total)
	}
}

// simulateStore sets cfg.Store from the --store flag (see virtualStore).
func simulateStore(cfg *simulate.Config, url string) error {
	st, err := virtualStore(url, "sluice-simulate")
	cfg.Store = st
	return err
}

// virtualStore returns, for a --store flag, how a run on a virtual clock builds its store:
// nil for memory (the run's own memory store), or for a store URL store.Open reads, checked
// to answer first, a fresh store under a fresh key prefix (name:<run>:<n>:) per call, taking
// the run's virtual clock as client time, so that the run stays deterministic in what it
// decides. simulate and replay share it.
func virtualStore(url, name string) (func(clock sluice.Clock) (sluice.Store, io.Closer, error), error) {
	scheme, err := store.Scheme(url)
	if err != nil || scheme == "memory" {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, closer, err := store.Open(ctx, store.Config{Backend: store.Backend{URL: url, Ping: true}})
	if err != nil {
		return nil, err
	}
	if err := closer.Close(); err != nil {
		return nil, err
	}
	run := fmt.Sprintf("%s:%x:", name, time.Now().UnixNano())
	var n atomic.Int64
	return func(clock sluice.Clock) (sluice.Store, io.Closer, error) {
		prefix := fmt.Sprintf("%s%d:", run, n.Add(1))
		return store.Open(context.Background(), store.Config{Backend: store.Backend{URL: url, Clock: clock, Prefix: prefix, Timeout: time.Second}})
	}, nil
}
