// Command sluice runs the Sluice rate-limit service, its reverse proxy and its accuracy
// simulator. Each subcommand lives in its own file; wiring lives in packages that tests start
// on :0 ports.
package main

import (
	"fmt"
	"io"
	"os"
)

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

var commands []command

func register(c command) { commands = append(commands, c) }

func main() {
	args, ignored := argsOf(os.Args)
	ignoredArgs = ignored
	os.Exit(run(args, os.Stdout, os.Stderr))
}

// ignoredArgs are the arguments of the process that sluice serve, run as /bin/ratelimit,
// leaves out as the peer does (argsOf); serve names them in a warning.
var ignoredArgs []string

// run runs the command args name. Bare `sluice` prints the usage on standard error and exits
// 2 (a usage error, as a command without its arguments); `sluice help`, `-h` and `--help`
// print it on standard output and exit 0; `sluice help COMMAND` is `sluice COMMAND -h`.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	if name == "help" && len(args) > 1 {
		name, args = args[1], []string{args[1], "-h"}
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(args[1:], stdout, stderr)
		}
	}
	switch name {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: sluice COMMAND [flags]\n\nSluice is a distributed rate limiter: a Go library, an Envoy rate-limit service and a\nrate-limiting reverse proxy.\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "  help           this text; 'sluice help COMMAND' is a command's help")
	fmt.Fprintln(w, "\nRun 'sluice COMMAND -h' for a command's flags and examples.")
}
