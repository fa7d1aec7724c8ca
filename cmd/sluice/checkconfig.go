package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/config"
)

func init() {
	register(command{name: "check-config", summary: "validate rules files without serving (exit 1 and every problem when invalid)", run: runCheckConfig})
}

func runCheckConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o config.Options
	fs.BoolVar(&o.Tree, "config-tree", false, "read every file below a directory, recursively, as envoyproxy/ratelimit reads its runtime directory")
	fs.BoolVar(&o.DotFiles, "config-dotfiles", false, "with --config-tree, read names starting with '.' too")
	fs.BoolVar(&o.MergeDomains, "merge-domains", false, "let several files define one domain (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG)")
	xdsDump := fs.Bool("xds", false, "each PATH is a dumped xDS snapshot: RateLimitConfig resources in JSON or YAML (checkxds.go)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice check-config [--config-tree] [--config-dotfiles] [--merge-domains] [--xds] PATH...   (rules files or directories; with --xds, dumped xDS snapshots)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
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
			fmt.Fprintln(stderr, err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: ok: %d domain(s) %v, %d limit(s), %d quota bucket rule(s)\n", p, len(c.Domains()), c.Domains(), len(c.Limits()), countQuotaBuckets(c))
	}
	return code
}

// countQuotaBuckets counts the RLQS quota rules of every domain.
func countQuotaBuckets(c *config.Config) int {
	n := 0
	for _, d := range c.Domains() {
		n += len(c.Domain(d).QuotaRules())
	}
	return n
}
