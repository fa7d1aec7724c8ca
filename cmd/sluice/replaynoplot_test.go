//go:build !plot

package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestReplayOutNeedsPlot: without -tags plot, replay --out says how to build with plotting.
func TestReplayOutNeedsPlot(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(append(append([]string{"replay"}, exampleReplay...), "--out", t.TempDir()), &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "-tags plot") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}
