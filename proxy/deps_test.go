package proxy_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoGRPCDependencies checks that the proxy and what it decides and counts with (package
// rls, the engine; server/rlsmetrics, its Prometheus series; server/admin, its endpoints)
// link neither gRPC nor go-control-plane, nor OpenTelemetry (the server's tracing wraps the
// engine's store from outside: rls.Config.WrapStore), nor envoyproxy/ratelimit's statsd client
// (gostats) and its exporter, which only the server's statsd stats use: the proxy serves no
// gRPC and sends no statsd (as the root package's TestCoreDependencies keeps heavy
// dependencies out of the core). The engine links no metrics client at all: it tells an
// rls.Observer.
func TestNoGRPCDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	banned := []string{"google.golang.org/grpc", "github.com/envoyproxy/go-control-plane", "go.opentelemetry.io/",
		"github.com/lyft/gostats", "github.com/prometheus/statsd_exporter"}
	for _, pkg := range []string{"github.com/sluicehq/sluice/proxy", "github.com/sluicehq/sluice/rls",
		"github.com/sluicehq/sluice/server/rlsmetrics", "github.com/sluicehq/sluice/server/admin"} {
		out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		deny := banned
		if pkg == "github.com/sluicehq/sluice/rls" {
			deny = append(deny, "github.com/prometheus/")
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range deny {
				if strings.HasPrefix(dep, b) {
					t.Errorf("package %s depends on %s", pkg, dep)
				}
			}
		}
	}
}
