package main

import (
	"strings"
	"testing"
)

// TestSimulateScaleUp: `sluice simulate --scenario quota_scale_up` prints a row per join of
// each TTL and topology, every newcomer served at its first report.
func TestSimulateScaleUp(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"simulate", "--scenario", "quota_scale_up"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1+4*8 || !strings.HasPrefix(lines[0], "ttl") {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) < 5 || f[3] != "1" {
			t.Fatalf("a newcomer not served at its first report: %q", l)
		}
	}
	if !strings.Contains(out.String(), "30s") {
		t.Fatalf("no 30 s TTL rows:\n%s", out.String())
	}
}
