//go:build plot

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestReplayOut: built with -tags plot, replay --out writes the figures of the example log.
func TestReplayOut(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(append(append([]string{"replay"}, exampleReplay...), "--quiet", "--out", dir), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, f := range []string{"access_denials.png", "access_denials.svg", "access_rates.png", "access_rates.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
