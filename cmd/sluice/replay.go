package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/replay"
	"github.com/sluicehq/sluice/simulate"
)

func init() {
	register(command{name: "replay", summary: "replay an access log through rules: would-be denials per rule and client", run: runReplay})
	register(command{name: "suggest", summary: "suggest a limit per rule from an access log, written as a rules file", run: runSuggest})
}

var replayHelp = help{
	synopsis: "sluice replay --config RULES --input LOG [flags]",
	description: `
Reads an access log as it is (Envoy's default format or Envoy Gateway's JSON, nginx's or
Apache's combined format, JSON lines or CSV with --fields; gzip or not), turns each line into
descriptors by the proxy section of the rules (or --actions), as sluice proxy does, and
decides them at their logged instants on a virtual clock, on the store and mode given, as fast
as the machine allows. Prints, per rule and for its most denied clients, the requests,
would-be denials (and those an exact sliding log would deny too), the first denial and the
per-client rates over the rule's period (peak, p50, p90, p99). With --compare, prints the
clients whose requests the two rule files decide differently instead. Client values are
hashed unless the rule says telemetry: raw.`,
	groups: []flagGroup{
		{"Input", []string{"input", "input-format", "fields", "trusted-proxies", "strict"}},
		{"Rules and deciding", []string{"config", "actions", "default-algorithm", "compare", "by", "store", "mode", "nodes", "routing", "seed"}},
		{"Output", []string{"format", "top", "max-clients", "out", "quiet"}},
	},
	examples: []string{
		"sluice replay --config examples/replay/rules.yaml --input examples/replay/access.log.gz",
		"sluice replay --config envoy-rules.yaml --actions '{rate_limits: [{actions: [{remote_address: {}}]}]}' --input access.log",
		"sluice replay --config rules.yaml --input envoy.log.gz --input-format envoy --format csv",
		"sluice replay --config rules.yaml --input access.log --compare stricter.yaml",
		"sluice replay --config rules.yaml --input events.jsonl --input-format json --fields time=ts,client=ip,header:x-api-key=key",
	},
}

var suggestHelp = help{
	synopsis: "sluice suggest --config RULES.yaml --input LOG [flags] > SUGGESTED.yaml",
	description: `
Replays an access log as sluice replay does and proposes, for each rule of the rules file the
log meets, a limit: the --percentile of the per-client peak rates over the rule's period, times
--headroom. Replays the log again under the suggested limits and writes the rules file with
them on standard output, each with its evidence as a comment (the percentiles, and the
requests and clients it would have denied), ready for sluice check-config. The log is read
twice: give a file.`,
	groups: []flagGroup{
		{"Input", []string{"input", "input-format", "fields", "trusted-proxies", "strict"}},
		{"Rules", []string{"config", "actions", "default-algorithm", "percentile", "headroom"}},
		{"Output", []string{"max-clients", "quiet"}},
	},
	examples: []string{
		"sluice suggest --config examples/replay/rules.yaml --input examples/replay/access.log.gz",
		"sluice suggest --config rules.yaml --input envoy.json.gz --input-format envoy-json --percentile 99.9 --headroom 2 > suggested.yaml",
	},
}

// replayFlags are the flags replay and suggest share.
type replayFlags struct {
	rules, actions, input, inputFormat, fields, trustedProxies, defaultAlgorithm string
	maxClients                                                                   int
	strict, quiet                                                                bool
}

func (f *replayFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.rules, "config", "", "rules file or directory with a proxy section (how a request becomes descriptors), as sluice proxy's; required")
	fs.StringVar(&f.actions, "actions", "", "the proxy section to build descriptors with, as YAML, in place of the rules file's (rules written for Envoy's route rate limits have none), e.g. '{rate_limits: [{actions: [{remote_address: {}}]}]}'")
	fs.StringVar(&f.input, "input", "", "the access log, gzip or not; - for standard input; required")
	fs.StringVar(&f.inputFormat, "input-format", "combined", "the log's format: "+strings.Join(replay.FormatNames, ", "))
	fs.StringVar(&f.fields, "fields", "", "for json, csv and envoy-json: the keys or columns, NAME=KEY,...: time, client, method, path, authority, scheme, cost, header:NAME (json and csv read keys named as the fields by default)")
	fs.StringVar(&f.trustedProxies, "trusted-proxies", "", "comma-separated CIDRs or addresses of the proxies whose X-Forwarded-For and Forwarded are believed, as sluice proxy's")
	fs.StringVar(&f.defaultAlgorithm, "default-algorithm", "sliding_window", "algorithm of the rules that name none")
	fs.IntVar(&f.maxClients, "max-clients", replay.DefaultMaxClients, "client summaries kept per rule (about 250 bytes each); past it the least recently seen are folded into the rule's figures")
	fs.BoolVar(&f.strict, "strict", false, "stop at the first malformed line (by default each is counted, the first shown with its line number, and skipped)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar (it is drawn only when standard error is a terminal)")
}

// load checks the flags and returns the replay's configuration and input.
func (f *replayFlags) load(stderr io.Writer) (replay.Config, replay.Input, config.Options, error) {
	var cfg replay.Config
	var o config.Options
	switch {
	case f.rules == "":
		return cfg, replay.Input{}, o, errors.New("--config: required (a rules file or directory with a proxy section)")
	case f.input == "":
		return cfg, replay.Input{}, o, errors.New("--input: required (the access log, or - for standard input)")
	}
	a, err := sluice.ParseAlgorithm(f.defaultAlgorithm)
	if err != nil {
		return cfg, replay.Input{}, o, fmt.Errorf("--default-algorithm: %w", err)
	}
	o.DefaultAlgorithm = a
	format, err := replay.ParseFormat(f.inputFormat, f.fields)
	if err != nil {
		return cfg, replay.Input{}, o, fmt.Errorf("--input-format: %w", err)
	}
	if f.maxClients <= 0 {
		return cfg, replay.Input{}, o, fmt.Errorf("--max-clients: must be positive, got %d", f.maxClients)
	}
	in, err := replay.FileInput(f.input)
	if err != nil {
		return cfg, replay.Input{}, o, fmt.Errorf("--input: %w", err)
	}
	rules, err := f.loadRules(f.rules, o, stderr)
	if err != nil {
		return cfg, replay.Input{}, o, fmt.Errorf("--config: %w", err)
	}
	cfg = replay.Config{Rules: rules, Format: format, TrustedProxies: list(f.trustedProxies), MaxClients: f.maxClients, Strict: f.strict}
	if !f.quiet {
		cfg.Progress = progressBar(stderr)
	}
	return cfg, in, o, nil
}

// loadRules loads a rules file or directory as check-config does, with --actions as its
// proxy section when set; its problems are printed on stderr.
func (f *replayFlags) loadRules(path string, o config.Options, stderr io.Writer) (*config.Config, error) {
	var rules *config.Config
	var err error
	if f.actions != "" {
		rules, err = replay.RulesWithActions(path, f.actions, o)
	} else {
		rules, err = config.LoadWith(path, o)
	}
	if err != nil {
		printProblems(stderr, err)
		return nil, fmt.Errorf("%s: invalid rules (or --actions)", path)
	}
	return rules, nil
}

// progressBar draws a bar on w, at most ten times a second, when w is a terminal; nil
// otherwise (a file or a pipe gets no progress).
func progressBar(w io.Writer) replay.Progress {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	var last time.Time
	return func(read, total, lines int64) {
		if now := time.Now(); now.Sub(last) < 100*time.Millisecond {
			return
		} else {
			last = now
		}
		if total <= 0 {
			fmt.Fprintf(w, "\rreplay: %d lines (%d MiB)", lines, read>>20)
			return
		}
		const width = 30
		done := int(min(read, total) * width / total)
		fmt.Fprintf(w, "\rreplay: [%s%s] %3d%% %d lines", strings.Repeat("#", done), strings.Repeat(".", width-done), min(read, total)*100/total, lines)
	}
}

// endProgress ends the bar's line, when there is one.
func endProgress(cfg replay.Config, w io.Writer) {
	if cfg.Progress != nil {
		fmt.Fprintln(w)
	}
}

func runReplay(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	var f replayFlags
	f.register(fs)
	compare := fs.String("compare", "", "a second rules file: print the clients whose requests the two decide differently, most changed first")
	by := fs.String("by", "client", "with --compare, what a client is: client (its address) or header:NAME")
	storeURL := fs.String("store", "memory", "store the instances decide on: memory, or a store URL as serve's --store takes (keys under a fresh sluice-replay:* prefix, the log's time as client time)")
	mode := fs.String("mode", "sync", "distribution mode: sync, overlimit or async_INTERVAL (e.g. async_100ms), over --nodes instances")
	nodes := fs.Int("nodes", 1, "instances deciding, sharing the store")
	routing := fs.String("routing", "round_robin", "how requests spread over the instances: round_robin, sticky (by client) or skewed")
	seed := fs.Uint64("seed", 1, "random seed of skewed routing")
	format := fs.String("format", "text", "table format: text, csv or json")
	top := fs.Int("top", replay.DefaultTop, "clients shown per rule (with --compare: in all)")
	out := fs.String("out", "", "directory to write the figures to, PNG and SVG (built with -tags plot)")
	if code, done := parseFlags("replay", fs, &replayHelp, args, stdout, stderr); done {
		return code
	}
	if *out != "" && writeReplayPlots == nil {
		fmt.Fprintln(stderr, errNoReplayPlots)
		return 2
	}
	cfg, in, o, err := f.load(stderr)
	if err == nil {
		err = replayOptions(&cfg, *storeURL, *mode, *routing, *format, *nodes, *top, *seed)
	}
	var other *config.Config
	if err == nil && *compare != "" {
		if other, err = f.loadRules(*compare, o, stderr); err != nil {
			err = fmt.Errorf("--compare: %w", err)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice replay: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if other != nil {
		rep, err := replay.Compare(ctx, cfg, other, *by, f.rules, *compare, in)
		endProgress(cfg, stderr)
		if err == nil {
			err = replay.WriteCompare(stdout, rep, *format)
		}
		if err != nil {
			fmt.Fprintf(stderr, "sluice replay: %v\n", err)
			return 1
		}
		return 0
	}
	rep, err := replay.Run(ctx, cfg, in)
	endProgress(cfg, stderr)
	if err == nil {
		err = replay.WriteTable(stdout, rep, *format)
	}
	if err == nil && *out != "" {
		var paths []string
		paths, err = writeReplayPlots(*out, rep)
		for _, p := range paths {
			fmt.Fprintf(stderr, "wrote %s\n", p)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice replay: %v\n", err)
		return 1
	}
	return 0
}

// replayOptions sets the store, the mode and the output bounds of a replay from its flags.
func replayOptions(cfg *replay.Config, storeURL, mode, routing, format string, nodes, top int, seed uint64) error {
	valid := false
	for _, name := range replay.Formats {
		valid = valid || name == format
	}
	if !valid {
		return fmt.Errorf("--format: unknown %q (want text, csv or json)", format)
	}
	if top < 0 {
		return fmt.Errorf("--top: must not be negative, got %d", top)
	}
	cfg.Top = max(top, 1)
	if nodes < 1 || nodes > 1024 {
		return fmt.Errorf("--nodes: must be between 1 and 1024, got %d", nodes)
	}
	r, err := simulate.ParseRouting(routing)
	if err != nil {
		return fmt.Errorf("--routing: %w", err)
	}
	if mode != "sync" && mode != "overlimit" && !strings.HasPrefix(mode, "async_") {
		return fmt.Errorf("--mode: %q: want sync, overlimit or async_INTERVAL (e.g. async_100ms)", mode)
	}
	modes, err := simulate.ParseModes(mode, nodes, []simulate.Routing{r})
	if err != nil {
		return fmt.Errorf("--mode: %w", err)
	}
	cfg.Mode, cfg.Seed = modes[0], seed
	if cfg.Store, err = virtualStore(storeURL, "sluice-replay"); err != nil {
		return fmt.Errorf("--store: %w", err)
	}
	return nil
}

func runSuggest(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("suggest", flag.ContinueOnError)
	var f replayFlags
	f.register(fs)
	percentile := fs.Float64("percentile", replay.DefaultPercentile*100, "percentile of the per-client peak rates over each rule's period the limit starts from, in (0, 100]")
	headroom := fs.Float64("headroom", replay.DefaultHeadroom, "factor the percentile is multiplied by, at least 1")
	if code, done := parseFlags("suggest", fs, &suggestHelp, args, stdout, stderr); done {
		return code
	}
	cfg, in, o, err := f.load(stderr)
	if err == nil {
		if st, serr := os.Stat(f.rules); serr == nil && st.IsDir() {
			err = fmt.Errorf("--config: %s is a directory: suggest rewrites one rules file", f.rules)
		}
	}
	if err == nil && (*percentile <= 0 || *percentile > 100) {
		err = fmt.Errorf("--percentile: must be in (0, 100], got %v", *percentile)
	}
	if err == nil && *headroom < 1 {
		err = fmt.Errorf("--headroom: must be at least 1, got %v", *headroom)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice suggest: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := replay.Suggest(ctx, cfg, replay.SuggestConfig{Percentile: *percentile / 100, Headroom: *headroom, Options: o, Proxy: f.actions}, f.rules, in)
	endProgress(cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sluice suggest: %v\n", err)
		return 1
	}
	if _, err := stdout.Write(res.Rules); err != nil {
		fmt.Fprintf(stderr, "sluice suggest: %v\n", err)
		return 1
	}
	return 0
}
