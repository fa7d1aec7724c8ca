//go:build !plot

package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSimulateOutNeedsPlotBuild: the default build refuses --out before running, naming the
// command that draws the figures, and links no plotting package.
func TestSimulateOutNeedsPlotBuild(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(append(simulateArgs, "--quiet", "--out", dir), &stdout, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "go run -tags plot ./cmd/sluice simulate --out") || stdout.Len() != 0 {
		t.Errorf("stderr %q, stdout %q", stderr.String(), stdout.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("wrote %d files", len(entries))
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "gonum.org/v1/plot") {
		t.Errorf("the default build of cmd/sluice links gonum.org/v1/plot")
	}
}
