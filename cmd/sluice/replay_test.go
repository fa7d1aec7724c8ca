package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// The README's example: rules and a gzipped nginx log of 10 minutes of a shop.
var exampleReplay = []string{"--config", "../../examples/replay/rules.yaml", "--input", "../../examples/replay/access.log.gz"}

func TestReplayCommand(t *testing.T) {
	for _, format := range []string{"text", "csv", "json"} {
		var stdout, stderr bytes.Buffer
		if code := run(append(append([]string{"replay"}, exampleReplay...), "--format", format), &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, stderr.String())
		}
		out := stdout.String()
		if !strings.Contains(out, "remote_address=203.0.113.66") || !strings.Contains(out, "path=/login|remote_address=203.0.113.99") {
			t.Errorf("%s: the scraper and the credential stuffer are not named:\n%s", format, out)
		}
		if stderr.Len() != 0 {
			t.Errorf("%s: stderr is not a terminal, yet: %q", format, stderr.String())
		}
		if format == "json" {
			var rep struct {
				Requests int64
				Rules    []struct{ Rule string }
			}
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.Requests != 3680 || len(rep.Rules) != 2 {
				t.Errorf("json: %v, %+v", err, rep)
			}
		}
	}
}

func TestReplayCompareCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := append(append([]string{"replay"}, exampleReplay...), "--compare", "../../examples/replay/stricter.yaml", "--format", "csv")
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if lines[0] != "client,requests,denied_a,denied_b,newly_denied,newly_allowed" || len(lines) != 5 ||
		!strings.HasPrefix(lines[1], "203.0.113.66,") {
		t.Errorf("compare:\n%s", stdout.String())
	}
}

// TestSuggestCommand: suggest prints a rules file that check-config loads, with the
// suggested limits and their evidence.
func TestSuggestCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"suggest"}, exampleReplay...), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	path := filepath.Join(t.TempDir(), "suggested.yaml")
	if err := os.WriteFile(path, stdout.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var check, checkErr bytes.Buffer
	if code := run([]string{"check-config", path}, &check, &checkErr); code != 0 {
		t.Fatalf("check-config refuses the suggested rules: %s\n%s", checkErr.String(), stdout.String())
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range c.Limits() {
		if l.Rules[0].Limit == 60 || l.Rules[0].Limit == 5 {
			t.Errorf("%s: the limit was not changed:\n%s", l.Name, stdout.String())
		}
	}
	if n := strings.Count(stdout.String(), "# sluice suggest: "); n != 2 {
		t.Errorf("%d suggestions with their evidence, want 2:\n%s", n, stdout.String())
	}
}

func TestReplayCommandRejectsBadFlags(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		args []string
		flag string
	}{
		{"replay", []string{"--input", "x.log"}, "config"},
		{"replay", []string{"--config", "../../examples/replay/rules.yaml"}, "input"},
		{"replay", append([]string{"--input-format", "w3c"}, exampleReplay...), "input-format"},
		{"replay", append([]string{"--fields", "when=ts", "--input-format", "json"}, exampleReplay...), "input-format"},
		{"replay", append([]string{"--format", "yaml"}, exampleReplay...), "format"},
		{"replay", append([]string{"--mode", "quota_1s"}, exampleReplay...), "mode"},
		{"replay", append([]string{"--nodes", "0"}, exampleReplay...), "nodes"},
		{"replay", append([]string{"--routing", "random"}, exampleReplay...), "routing"},
		{"replay", append([]string{"--default-algorithm", "lottery"}, exampleReplay...), "default-algorithm"},
		{"replay", append([]string{"--max-clients", "0"}, exampleReplay...), "max-clients"},
		{"replay", append([]string{"--compare", "nope.yaml"}, exampleReplay...), "compare"},
		{"replay", []string{"--config", "../../examples/replay/rules.yaml", "--input", "nope.log"}, "input"},
		{"replay", append([]string{"--store", "mysql://x"}, exampleReplay...), "store"},
		{"suggest", append([]string{"--percentile", "0"}, exampleReplay...), "percentile"},
		{"suggest", append([]string{"--headroom", "0.5"}, exampleReplay...), "headroom"},
		{"suggest", []string{"--config", "../../examples/replay", "--input", "../../examples/replay/access.log.gz"}, "config"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{c.cmd}, c.args...), &stdout, &stderr); code != 2 {
			t.Errorf("%s %v: exit %d, want 2 (%s)", c.cmd, c.args, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "--"+c.flag) {
			t.Errorf("%s %v: the error does not name --%s: %s", c.cmd, c.args, c.flag, stderr.String())
		}
	}
}

// TestReplayStdinAndStrict: - reads standard input; with --strict a malformed line stops
// the replay with its line number (exit 1).
func TestReplayStdinAndStrict(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "access.log")
	line := `192.0.2.1 - - [10/Oct/2024:13:55:36 +0000] "GET / HTTP/1.1" 200 2 "-" "-"` + "\n"
	if err := os.WriteFile(log, []byte(line+"not a request\n"+line), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stdin := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = stdin }()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"replay", "--config", "../../examples/replay/rules.yaml", "--input", "-"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "- (combined): 3 lines, 2 requests") || !strings.Contains(stdout.String(), "1 malformed line skipped: line 2 (") {
		t.Errorf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"replay", "--config", "../../examples/replay/rules.yaml", "--input", log, "--strict"}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "line 2:") {
		t.Errorf("strict: exit %d: %s", code, stderr.String())
	}
}

// TestReplayActionsFlag: rules without a proxy section replay with --actions as theirs;
// without it they are refused, saying why.
func TestReplayActionsFlag(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "envoy.yaml")
	src := "domain: shop\ndescriptors:\n  - key: remote_address\n    telemetry: raw\n    rate_limit: {unit: minute, requests_per_unit: 60}\n"
	if err := os.WriteFile(rules, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"replay", "--config", rules, "--input", "../../examples/replay/access.log.gz"}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "no document has a proxy section") {
		t.Errorf("without --actions: exit %d: %s", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	args = append(args, "--actions", "{rate_limits: [{actions: [{remote_address: {}}]}]}")
	if code := run(args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "remote_address=203.0.113.66  1200") {
		t.Errorf("with --actions: exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"suggest", "--config", rules, "--input", "../../examples/replay/access.log.gz", "--actions", "{rate_limits: [{actions: [{remote_address: {}}]}]}"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "proxy:") || !strings.Contains(stdout.String(), "# sluice suggest: shop.remote_address: 60/1m ->") {
		t.Errorf("suggest with --actions: exit %d: %s%s", code, stdout.String(), stderr.String())
	}
}

// TestProgressBarOnlyOnATerminal: the bar is drawn on a character device (a terminal) only,
// never into a file, a pipe or a buffer.
func TestProgressBarOnlyOnATerminal(t *testing.T) {
	if progressBar(&bytes.Buffer{}) != nil {
		t.Error("a bar for a buffer")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if progressBar(f) != nil {
		t.Error("a bar for a file")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if progressBar(w) != nil {
		t.Error("a bar for a pipe")
	}
	dev, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer dev.Close()
	bar := progressBar(dev) // a character device, as a terminal is
	if bar == nil {
		t.Fatal("no bar for a character device")
	}
	bar(50, 100, 1000)
	bar(0, 0, 5) // size unknown (standard input)
}
