//go:build plot

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestSimulateOut: built with -tags plot, simulate --out writes the figures.
func TestSimulateOut(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(append(simulateArgs, "--quiet", "--out", dir), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, f := range []string{"boundary_counted_vs_perfect.png", "boundary_admitted.svg", "boundary_over_admission.png"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
