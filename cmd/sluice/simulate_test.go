package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// simulateArgs is a short run of every kind of flag; simulateplot_test.go adds --out.
var simulateArgs = []string{"simulate", "--scenario", "boundary", "--algorithms", "fixed_window,sliding_window_4",
	"--modes", "single,sync", "--nodes", "2", "--routing", "round_robin,skewed", "--duration", "10m",
	"--seed", "3", "--format", "csv"}

func TestSimulateCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(simulateArgs, &stdout, &stderr)
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
	// every scenario -scenario accepts is listed, the criticality one included (issue 23)
	if !strings.Contains(stdout.String(), "\ncriticality: one key at 2x its limit") {
		t.Errorf("--list omits the criticality scenario:\n%s", stdout.String())
	}
}

// --store redis:// runs the distributed modes against Redis: a short run gives the same table
// as the memory store (both decide on the simulation's virtual clock).
func TestSimulateCommandRedis(t *testing.T) {
	addr := testenv.RedisAddr(t)
	args := []string{"simulate", "--quiet", "--scenario", "flood", "--duration", "3m", "--nodes", "3",
		"--algorithms", "sliding_window,gcra", "--modes", "sync,async_1s,fallback", "--format", "csv"}
	var mem, red, stderr bytes.Buffer
	if code := run(args, &mem, &stderr); code != 0 {
		t.Fatalf("memory: exit %d: %s", code, stderr.String())
	}
	if code := run(append(args, "--store", "redis://"+addr+"/0"), &red, &stderr); code != 0 {
		t.Fatalf("redis: exit %d: %s", code, stderr.String())
	}
	if red.String() != mem.String() {
		t.Fatalf("redis table differs from memory:\n%s\nmemory:\n%s", red.String(), mem.String())
	}
	if n := strings.Count(red.String(), "\n"); n != 1+6 {
		t.Fatalf("%d lines:\n%s", n, red.String())
	}
}

func TestSimulateCommandBadStore(t *testing.T) {
	for _, url := range []string{"postgres://x", "redis://127.0.0.1:1/0"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"simulate", "--quiet", "--modes", "sync", "--store", url}, &stdout, &stderr); code != 2 ||
			!strings.Contains(stderr.String(), "store") {
			t.Errorf("--store %s: exit %d: %s", url, code, stderr.String())
		}
	}
}
