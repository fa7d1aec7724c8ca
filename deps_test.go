package sluice_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreDependencies checks that importing package sluice pulls in no Redis, gRPC or
// Prometheus code: heavy dependencies stay in the packages that need them.
func TestCoreDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/sluicehq/sluice").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, ".") && !strings.HasPrefix(dep, "vendor/") && !strings.HasPrefix(dep, "github.com/sluicehq/sluice") {
			t.Errorf("package sluice depends on %s", dep)
		}
	}
}
