package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check-config counts the max_in_flight limits and says who enforces them; with --serve it
// refuses them as sluice serve does, naming the field.
func TestCheckConfigInFlight(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	rules := "domain: d\ndescriptors:\n  - key: route\n    rate_limit: {unit: second, requests_per_unit: 5}\n    max_in_flight: {limit: 2, lease: 10s}\n"
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"check-config", path}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "1 limit(s), 0 quota bucket rule(s), 1 max_in_flight (enforced by sluice proxy") {
		t.Errorf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"check-config", "--serve", path}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "rules.yaml:5: descriptors[0].max_in_flight: not enforced here") {
		t.Errorf("--serve: exit %d: %s%s", code, out.String(), errOut.String())
	}
}
