package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimulateCommand(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"simulate", "--scenario", "boundary", "--algorithms", "fixed_window,sliding_window_4",
		"--modes", "single,sync", "--nodes", "2", "--routing", "round_robin,skewed", "--duration", "10m",
		"--seed", "3", "--format", "csv", "--out", dir}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 1+2*3 || !strings.HasPrefix(lines[0], "scenario,algorithm,mode,nodes,routing,requests,admitted_fraction,over_admission,limit_violations,needless_denials,mean_abs_error") {
		t.Fatalf("table:\n%s", stdout.String())
	}
	if !strings.HasPrefix(lines[1], "boundary,fixed_window,single,1,-,") || !strings.Contains(lines[1], ",2,") {
		t.Errorf("fixed window under the boundary attack: %s", lines[1])
	}
	if !strings.Contains(stderr.String(), "100%") {
		t.Errorf("no progress on stderr: %q", stderr.String())
	}
	for _, f := range []string{"boundary_counted_vs_perfect.png", "boundary_admitted.svg", "boundary_over_admission.png"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestSimulateCommandRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario", "nope"},
		{"--algorithms", "nope"},
		{"--modes", "nope"},
		{"--routing", "nope", "--modes", "sync"},
		{"--format", "yaml"},
		{"--nodes", "0", "--modes", "sync"},
		{"--duration", "-1m"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"simulate", "--quiet"}, args...), &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr.String())
		}
		if field := strings.TrimPrefix(args[0], "--"); !strings.Contains(stderr.String(), field) {
			t.Errorf("%v: error does not name %s: %s", args, field, stderr.String())
		}
	}
}

func TestSimulateList(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"simulate", "--list"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "cloudflare") {
		t.Errorf("exit %d: %s", code, stdout.String())
	}
}
