package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/xds"
)

// checkXDSDump is check-config --xds: the file at p is a dumped xDS snapshot of
// RateLimitConfig resources (JSON or YAML; see xds.DecodeDump), compiled as serve compiles
// the snapshots of --xds-server. It returns the exit code.
func checkXDSDump(p string, o config.Options, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(p)
	if err != nil {
		fmt.Fprintln(stderr, "config:", err)
		return 1
	}
	c, err := xds.LoadDump(p, data, o)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok: %d domain(s) %v, %d limit(s)\n", p, len(c.Domains()), c.Domains(), len(c.Limits()))
	return 0
}
