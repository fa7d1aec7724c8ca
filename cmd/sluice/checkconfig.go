package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/config"
)

func init() {
	register(command{name: "check-config", summary: "validate rules files without serving (exit 1 and every problem when invalid)", run: runCheckConfig})
}

var checkConfigHelp = help{
	synopsis: "sluice check-config [flags] PATH...",
	description: `
Loads each rules file or directory as serve and proxy would, without serving, and prints
what it holds, or every problem of every file, each with its file, line and YAML path
(descriptors[0].rate_limit.unit). Exits 0 when every PATH is valid, 1 when one is not.`,
	groups: []flagGroup{
		{"Reading", []string{"config-tree", "config-dotfiles", "merge-domains", "serve", "xds", "max-lease"}},
	},
	examples: []string{
		"sluice check-config examples/config/rules.yaml",
		"sluice check-config --config-tree --merge-domains /srv/runtime_data/current/config",
		"sluice check-config --xds snapshot.json",
	},
	args: "PATH...",
}

func runCheckConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	var o config.Options
	fs.BoolVar(&o.Tree, "config-tree", false, "read every file below a directory, recursively, as envoyproxy/ratelimit reads its runtime directory")
	fs.BoolVar(&o.DotFiles, "config-dotfiles", false, "with --config-tree, read names starting with '.' too")
	fs.BoolVar(&o.MergeDomains, "merge-domains", false, "let several files define one domain (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG)")
	fs.BoolVar(&o.RefuseInFlight, "serve", false, "check as sluice serve loads the rules: max_in_flight refused (its RLS cannot see a request end)")
	fs.DurationVar(&o.MaxLease, "max-lease", config.DefaultMaxLease, "longest lease a max_in_flight may ask for, as sluice proxy --max-lease")
	xdsDump := fs.Bool("xds", false, "each PATH is a dumped xDS snapshot: RateLimitConfig resources in JSON or YAML, one, a list, or a DiscoveryResponse's resources")
	if code, done := parseFlags("check-config", fs, &checkConfigHelp, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "sluice check-config: no PATH: name the rules files or directories to check\nRun 'sluice check-config -h' for its flags.")
		return 2
	}
	code := 0
	for _, p := range fs.Args() {
		if *xdsDump {
			code = max(code, checkXDSDump(p, o, stdout, stderr))
			continue
		}
		c, err := config.LoadWith(p, o)
		if err != nil {
			n := printProblems(stderr, err)
			fmt.Fprintf(stderr, "%s: %d problem(s)\n", p, n)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: ok: %d domain(s) %v, %d rate limit(s) on %d descriptor(s), %d quota bucket rule(s)%s\n",
			p, len(c.Domains()), c.Domains(), c.RateLimits(), len(c.Limits()), countQuotaBuckets(c), inFlightNote(c))
	}
	return code
}

// printProblems writes each problem of err on a line of its own, without the prefix every
// one shares, and counts them.
func printProblems(w io.Writer, err error) int {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		msg := e.Error()
		if errors.Is(e, config.ErrInvalid) {
			msg = strings.TrimPrefix(msg, config.ErrInvalid.Error()+": ")
		}
		fmt.Fprintln(w, msg)
	}
	return len(errs)
}

// countQuotaBuckets counts the RLQS quota rules of every domain.
func countQuotaBuckets(c *config.Config) int {
	n := 0
	for _, d := range c.Domains() {
		n += len(c.Domain(d).QuotaRules())
	}
	return n
}
