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

// TestModuleDependencies checks that the root go.mod does not require the plotting library
// (simulate/figures is a module of its own, joined by go.work) and that no package of the
// module links a test-only dependency (porcupine checks store/redis's histories in tests).
func TestModuleDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	gomod, err := exec.Command(goTool, "mod", "edit", "-json").Output()
	if err != nil {
		t.Fatalf("go mod edit: %v", err)
	}
	if strings.Contains(string(gomod), "gonum.org/") {
		t.Errorf("go.mod requires gonum (simulate/figures has its own go.mod)")
	}
	deps, err := exec.Command(goTool, "list", "-deps", "./...").Output() // the module's packages, not the workspace's
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(deps)) {
		for _, testOnly := range []string{"github.com/anishathalye/porcupine", "gonum.org/"} {
			if strings.HasPrefix(dep, testOnly) {
				t.Errorf("a non-test build of the module links %s", dep)
			}
		}
	}
}

// TestTransportDependencies checks that Connect (connectrpc.com/connect) is linked by package
// connectlimit alone: neither the root package nor another transport (httplimit, grpclimit,
// the server, the proxy) nor any other package of the module pulls it in; and that
// connectlimit links no gRPC, so that a Connect service need not build grpc-go.
func TestTransportDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goTool, "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const connectlimit = "github.com/sluicehq/sluice/connectlimit"
	seen := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		banned := "connectrpc.com/"
		if pkg == connectlimit {
			seen, banned = true, "google.golang.org/grpc"
		}
		for _, dep := range strings.Fields(deps) {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("package %s depends on %s", pkg, dep)
				break
			}
		}
	}
	if !seen {
		t.Errorf("go list did not list %s", connectlimit)
	}
}
