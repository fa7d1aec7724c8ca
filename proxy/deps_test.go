package proxy_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoGRPCDependencies checks that the proxy and the engine it decides with (package rls)
// link neither gRPC nor go-control-plane, nor OpenTelemetry (the server's tracing wraps the
// engine's store from outside: rls.Config.WrapStore): the proxy serves no gRPC (as the root
// package's TestCoreDependencies keeps heavy dependencies out of the core).
func TestNoGRPCDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	for _, pkg := range []string{"github.com/sluicehq/sluice/proxy", "github.com/sluicehq/sluice/rls"} {
		out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "google.golang.org/grpc") || strings.HasPrefix(dep, "github.com/envoyproxy/go-control-plane") ||
				strings.HasPrefix(dep, "go.opentelemetry.io/") {
				t.Errorf("package %s depends on %s", pkg, dep)
			}
		}
	}
}
