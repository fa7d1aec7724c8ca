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
	fs.BoolVar(&o.RefuseInFlight, "serve", false, "check as sluice serve loads the rules: max_in_flight refused (its RLS cannot see a request end)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice check-config [--config-tree] [--config-dotfiles] [--merge-domains] [--serve] PATH...   (rules files or directories)")
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
		c, err := config.LoadWith(p, o)
		if err != nil {
			fmt.Fprintln(stderr, err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: ok: %d domain(s) %v, %d limit(s), %d quota bucket rule(s)%s\n", p, len(c.Domains()), c.Domains(), len(c.Limits()), countQuotaBuckets(c), inFlightNote(c))
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
