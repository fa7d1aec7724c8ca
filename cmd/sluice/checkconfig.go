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
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sluice check-config PATH...   (rules files or directories)")
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
		c, err := config.Load(p)
		if err != nil {
			fmt.Fprintln(stderr, err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: ok: %d domain(s) %v, %d limit(s), %d quota bucket rule(s)\n", p, len(c.Domains()), c.Domains(), len(c.Limits()), quotaRules(c))
	}
	return code
}

// quotaRules counts the RLQS quota rules of every domain.
func quotaRules(c *config.Config) int {
	n := 0
	for _, d := range c.Domains() {
		n += len(c.Domain(d).QuotaRules())
	}
	return n
}
