package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"
)

func init() {
	register(command{name: "version", summary: "print the version of sluice and how it was built", run: runVersion})
}

var versionHelp = help{
	synopsis:    "sluice version",
	description: "Prints the module version of sluice (\"(devel)\" when built from a checkout), the Go\nversion, and the commit it was built from when the build recorded it (the image's build\nstamps both).",
	examples:    []string{"sluice version"},
}

// stampedVersion and stampedCommit are set with -ldflags "-X main.stampedVersion=...
// -X main.stampedCommit=..." by a build that records no version control information (a go
// build with -buildvcs=false, or outside the checkout: scripts/image.sh stamps the image's).
// The build information wins where it has them.
var stampedVersion, stampedCommit string

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if code, done := parseFlags("version", fs, &versionHelp, args, stdout, stderr); done {
		return code
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(stdout, "sluice: no build information in this binary")
		return 0
	}
	fmt.Fprint(stdout, versionText(bi))
	return 0
}

// versionText is what `sluice version` prints of the build information bi.
func versionText(bi *debug.BuildInfo) string {
	version := bi.Main.Version
	if (version == "" || version == "(devel)") && stampedVersion != "" {
		version = stampedVersion
	}
	s := fmt.Sprintf("sluice %s (%s)\n", version, bi.GoVersion)
	settings := make(map[string]string)
	for _, kv := range bi.Settings {
		settings[kv.Key] = kv.Value
	}
	if settings["vcs.revision"] == "" && stampedCommit != "" {
		settings["vcs.revision"] = stampedCommit
	}
	if rev := settings["vcs.revision"]; rev != "" {
		s += fmt.Sprintf("commit %s", rev)
		if t := settings["vcs.time"]; t != "" {
			s += " of " + t
		}
		if settings["vcs.modified"] == "true" {
			s += ", with uncommitted changes"
		}
		s += "\n"
	}
	return s
}
