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

func main() { os.Exit(run(argsOf(os.Args), os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		for _, c := range commands {
			if c.name == args[0] {
				return c.run(args[1:], stdout, stderr)
			}
		}
		if args[0] != "help" && args[0] != "-h" && args[0] != "--help" {
			fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", args[0])
			usage(stderr)
			return 2
		}
	}
	usage(stdout)
	if len(args) == 0 {
		return 2
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sluice COMMAND [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'sluice COMMAND -h' for a command's flags.")
}
