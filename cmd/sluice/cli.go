package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
)

// The one grammar of every command: `sluice COMMAND [flags]`, flags only (check-config also
// takes paths). -h and --help print the command's help on standard output and exit 0; a
// bad flag or argument is said on standard error, with where to read the help, and exits 2.

// help is what `sluice COMMAND -h` prints: a synopsis, a description, the flags by group
// and examples.
type help struct {
	synopsis    string // e.g. "sluice serve [flags]"
	description string // paragraphs, wrapped by hand
	// groups order the flags: each flag is listed under the first group naming it, the
	// others under "Other". A new flag joins a group by adding its name to a list here.
	groups   []flagGroup
	examples []string
	// args, when set, names the positional arguments the command takes (check-config's
	// paths); without it a positional argument is refused.
	args string
}

// flagGroup is one heading of a command's flags.
type flagGroup struct {
	name  string
	flags []string
}

// parseFlags parses args into fs, the flags of command name. done says the command must
// stop with code: 0 after -h or --help (the help printed on stdout), 2 after a bad flag or,
// for a command without h.args, any positional argument.
func parseFlags(name string, fs *flag.FlagSet, h *help, args []string, stdout, stderr io.Writer) (code int, done bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		h.print(stdout, fs)
		return 0, true
	case err != nil:
		fmt.Fprintf(stderr, "sluice %s: %v\nRun 'sluice %s -h' for its flags.\n", name, err, name)
		return 2, true
	case fs.NArg() > 0 && h.args == "":
		fmt.Fprintf(stderr, "sluice %s: unexpected argument %q: %s takes flags only%s; the argument and everything after it were not read\nRun 'sluice %s -h' for its flags.\n",
			name, fs.Arg(0), name, configHint(fs, fs.Arg(0)), name)
		return 2, true
	}
	return 0, false
}

// configHint says how a command with --config takes a rules file.
func configHint(fs *flag.FlagSet, arg string) string {
	if fs.Lookup("config") == nil {
		return ""
	}
	return fmt.Sprintf(" (a rules file or directory is given with --config, e.g. --config %s)", arg)
}

// print writes the help of the command whose flags are fs.
func (h *help) print(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", h.synopsis, strings.TrimSpace(h.description))
	byGroup := make(map[string][]*flag.Flag)
	order := make(map[string]int)
	for i, g := range h.groups {
		for _, name := range g.flags {
			if _, dup := order[name]; !dup {
				order[name] = i
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if _, hidden := f.Value.(*aliasValue); hidden {
			return
		}
		g := "Other"
		if i, ok := order[f.Name]; ok {
			g = h.groups[i].name
		}
		byGroup[g] = append(byGroup[g], f)
	})
	names := make([]string, 0, len(h.groups)+1)
	for _, g := range h.groups {
		names = append(names, g.name)
	}
	names = append(names, "Other")
	for _, g := range names {
		flags := byGroup[g]
		if len(flags) == 0 {
			continue
		}
		delete(byGroup, g) // a group named twice is listed once
		if i, ok := groupIndex(h.groups, g); ok {
			sort.SliceStable(flags, func(a, b int) bool {
				return indexOf(h.groups[i].flags, flags[a].Name) < indexOf(h.groups[i].flags, flags[b].Name)
			})
		}
		fmt.Fprintf(w, "\n%s:\n", g)
		for _, f := range flags {
			printFlag(w, f)
		}
	}
	if len(h.examples) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		for _, e := range h.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

func groupIndex(groups []flagGroup, name string) (int, bool) {
	for i, g := range groups {
		if g.name == name {
			return i, true
		}
	}
	return 0, false
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return len(list)
}

// printFlag writes one flag: its name and argument, then its usage and default indented.
func printFlag(w io.Writer, f *flag.Flag) {
	arg, usage := flag.UnquoteUsage(f)
	line := "  --" + f.Name
	if arg != "" {
		line += " " + arg
	}
	fmt.Fprintln(w, line)
	text := usage
	if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "0s" {
		text += fmt.Sprintf(" (default %s)", def)
	}
	for _, l := range wrap(text, 80-6) {
		fmt.Fprintf(w, "      %s\n", l)
	}
}

// wrap breaks s into lines of at most width characters, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// aliasValue is a former spelling of a flag: setting it sets the flag and warns, once, to
// use the new name. It is left out of the help.
type aliasValue struct {
	old, name string
	target    flag.Value
	convert   func(string) (string, error) // old value -> the flag's value; nil: as given
	isBool    bool
	warn      io.Writer
	once      sync.Once
}

func (a *aliasValue) String() string { return "" }

func (a *aliasValue) IsBoolFlag() bool { return a.isBool }

func (a *aliasValue) Set(v string) error {
	a.once.Do(func() {
		fmt.Fprintf(a.warn, "sluice: --%s is a former name of --%s and will go: use --%s\n", a.old, a.name, a.name)
	})
	if a.convert != nil {
		c, err := a.convert(v)
		if err != nil {
			return err
		}
		v = c
	}
	return a.target.Set(v)
}

// alias registers old as a hidden former spelling of the flag name (already defined on fs);
// convert maps its values when they differ (nil: the same values), isBool makes it a
// boolean flag. The warning goes to warn.
func alias(fs *flag.FlagSet, old, name string, warn io.Writer, isBool bool, convert func(string) (string, error)) {
	fs.Var(&aliasValue{old: old, name: name, target: fs.Lookup(name).Value, convert: convert, isBool: isBool, warn: warn}, old, "former name of --"+name)
}
