package main

import (
	"flag"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/help")

// clearEnv unsets every environment variable for the test (restored after it), so that no
// SLUICE_* or envoyproxy/ratelimit variable changes a default the help shows.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
		os.Unsetenv(k)
	}
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut strings.Builder
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// golden compares got with testdata/help/name.txt, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "help", name+".txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestHelp -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s: help differs from %s (go test -run TestHelp -update rewrites it):\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// TestHelpGolden: -h, --help and `sluice help COMMAND` print each command's help on standard
// output and exit 0; the text is the golden file's.
func TestHelpGolden(t *testing.T) {
	clearEnv(t)
	for _, c := range commands {
		var first string
		for i, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			code, out, errOut := runCLI(args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: sluice "+c.name) {
				t.Errorf("%v: exit %d, stderr %q, stdout %.60q: want exit 0 and the help on stdout", args, code, errOut, out)
			}
			if i == 0 {
				first = out
				golden(t, c.name, out)
			} else if out != first {
				t.Errorf("%v: not the help of %v", args, []string{c.name, "-h"})
			}
			for _, section := range []string{"\n\nExamples:\n  sluice " + c.name, ":\n  --"} {
				if c.name != "version" && !strings.Contains(out, section) {
					t.Errorf("%v: no %q", args, section)
				}
			}
		}
	}
}

// TestTopLevelUsage: `sluice help`, `-h` and `--help` exit 0 with the usage on stdout; bare
// `sluice` and an unknown command exit 2 with it on stderr.
func TestTopLevelUsage(t *testing.T) {
	clearEnv(t)
	var usageText string
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: sluice COMMAND") {
			t.Errorf("%v: exit %d, stderr %q, stdout %.40q", args, code, errOut, out)
		}
		usageText = out
	}
	golden(t, "sluice", usageText)
	for _, c := range commands {
		if !strings.Contains(usageText, "\n  "+c.name+" ") {
			t.Errorf("usage does not list %s", c.name)
		}
	}
	if code, out, errOut := runCLI(); code != 2 || out != "" || errOut != usageText {
		t.Errorf("bare sluice: exit %d, stdout %q, stderr %.40q: want 2 and the usage on stderr", code, out, errOut)
	}
	if code, _, errOut := runCLI("serv"); code != 2 || !strings.Contains(errOut, `unknown command "serv"`) {
		t.Errorf("unknown command: exit %d, %q", code, errOut)
	}
}

// TestPositionalArgumentsRefused: a command that takes flags only refuses an argument (and
// so the flags after it, which the flag package would not read) with exit 2, before
// anything listens; serve and proxy say to use --config.
func TestPositionalArgumentsRefused(t *testing.T) {
	clearEnv(t)
	for _, args := range [][]string{
		{"serve", "rules.yaml", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"},
		{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "rules.yaml", "--store", "memory"},
		{"proxy", "--upstream", "http://127.0.0.1:1", "rules.yaml"},
		{"demo", "5"},
		{"simulate", "steady"},
		{"version", "now"},
	} {
		code, out, errOut := runCLI(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "unexpected argument") || !strings.Contains(errOut, "sluice "+args[0]+" -h") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q: want 2 and the argument refused", args, code, out, errOut)
		}
		if (args[0] == "serve" || args[0] == "proxy") && !strings.Contains(errOut, "--config rules.yaml") {
			t.Errorf("%v: %q does not say to use --config", args, errOut)
		}
	}
}

// TestBadFlag: an unknown flag exits 2 with the error and where the help is, not the help.
func TestBadFlag(t *testing.T) {
	clearEnv(t)
	for _, c := range commands {
		code, out, errOut := runCLI(c.name, "--no-such-flag")
		if code != 2 || out != "" || !strings.Contains(errOut, "no-such-flag") ||
			!strings.Contains(errOut, "Run 'sluice "+c.name+" -h'") || strings.Contains(errOut, "Usage:") {
			t.Errorf("%s --no-such-flag: exit %d, stdout %q, stderr %q", c.name, code, out, errOut)
		}
	}
}

// TestSharedFlagsSpelledAlike: the flags serve and proxy share have one spelling, and the
// former spellings still work, warning once.
func TestSharedFlagsSpelledAlike(t *testing.T) {
	clearEnv(t)
	_, serveHelp, _ := runCLI("serve", "-h")
	_, proxyHelp, _ := runCLI("proxy", "-h")
	for _, name := range []string{"config", "reload-interval", "store", "mode", "fallback", "store-timeout", "store-prefix",
		"http-addr", "headers", "log-level", "log-format"} {
		for cmd, text := range map[string]string{"serve": serveHelp, "proxy": proxyHelp} {
			if !strings.Contains(text, "\n  --"+name+" ") && !strings.Contains(text, "\n  --"+name+"\n") {
				t.Errorf("%s -h: no --%s", cmd, name)
			}
		}
	}
	for _, old := range []string{"\n  --addr string\n", "\n  --response-headers\n"} {
		if strings.Contains(serveHelp+proxyHelp, old) {
			t.Errorf("help lists the former flag %s", old)
		}
	}
}

// TestFormerFlagNames: --addr (proxy) and --response-headers (serve) set the flags they
// were renamed to, with one warning however often they are given.
func TestFormerFlagNames(t *testing.T) {
	clearEnv(t)
	var warn strings.Builder
	var p proxyFlags
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	p.register(fs)
	alias(fs, "addr", "http-addr", &warn, false, nil)
	if err := fs.Parse([]string{"--addr", "127.0.0.1:1", "--addr", "127.0.0.1:2"}); err != nil || p.addr != "127.0.0.1:2" {
		t.Errorf("--addr: %v, http-addr %q", err, p.addr)
	}
	if n := strings.Count(warn.String(), "--addr is a former name of --http-addr"); n != 1 {
		t.Errorf("%d warnings, want 1: %q", n, warn.String())
	}

	warn.Reset()
	s := serveFlags{peer: readPeerEnv(os.LookupEnv)}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	s.register(fs)
	alias(fs, "response-headers", "headers", &warn, true, nil)
	if on, _ := s.responseHeaders(); on {
		t.Fatal("headers on by default")
	}
	if err := fs.Parse([]string{"--response-headers"}); err != nil {
		t.Fatal(err)
	}
	if on, err := s.responseHeaders(); !on || err != nil || !strings.Contains(warn.String(), "use --headers") {
		t.Errorf("--response-headers: headers %v %v, warning %q", on, err, warn.String())
	}
	for v, want := range map[string]bool{"ratelimit": true, "none": false} {
		s.headers = v
		if on, err := s.responseHeaders(); on != want || err != nil {
			t.Errorf("--headers %s: %v %v", v, on, err)
		}
	}
	s.headers = "both"
	if _, err := s.responseHeaders(); err == nil || !strings.Contains(err.Error(), "--headers: want ratelimit or none") {
		t.Errorf("--headers both: %v", err)
	}
}

// TestDemoDurationsForPeople: demo prints 333ms, not 333.333334ms.
func TestDemoDurationsForPeople(t *testing.T) {
	code, out, errOut := runCLI("demo", "--algorithm", "gcra", "--limit", "3", "--requests", "4")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "request  4: allowed=false remaining=0 retry_after=333ms reset_after=1s\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("demo output\n%s\ndoes not end with\n%s", out, want)
	}
	if code, _, errOut := runCLI("demo", "--algorithm", "magic"); code != 2 || !strings.Contains(errOut, "token_bucket") {
		t.Errorf("unknown algorithm: exit %d, %q: want 2 and the algorithms", code, errOut)
	}
}

// TestVersion: `sluice version` prints the module version, the Go version and the commit
// the build recorded.
func TestVersion(t *testing.T) {
	code, out, errOut := runCLI("version")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "sluice ") || !strings.Contains(out, "(go1.") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/sluicehq/sluice", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-27T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionText(bi), "sluice v1.2.3 (go1.26.0)\ncommit abc123 of 2026-11-27T10:00:00Z, with uncommitted changes\n"; got != want {
		t.Errorf("versionText = %q, want %q", got, want)
	}
	// Stamped with -ldflags -X (issue 30: the image, built without VCS stamping, said
	// "(devel)" and no commit): used where the build information has none.
	stampedVersion, stampedCommit = "v1.3.0-2-gdeadbee", "deadbeef00"
	defer func() { stampedVersion, stampedCommit = "", "" }()
	devel := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}
	if got, want := versionText(devel), "sluice v1.3.0-2-gdeadbee (go1.26.0)\ncommit deadbeef00\n"; got != want {
		t.Errorf("versionText, stamped = %q, want %q", got, want)
	}
	if got, want := versionText(bi), "sluice v1.2.3 (go1.26.0)\ncommit abc123 of 2026-11-27T10:00:00Z, with uncommitted changes\n"; got != want {
		t.Errorf("versionText, stamped but with build information = %q, want %q", got, want)
	}
}
