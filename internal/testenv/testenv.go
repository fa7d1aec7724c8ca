// Package testenv finds the real servers that scripts/test.sh starts. Each lookup skips the
// test when its variable is unset locally, and fails it when CI is set, so a green CI run
// always means the tests ran against real servers.
package testenv

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Get returns the value of the environment variable name, skipping (locally) or failing (in
// CI) the test when it is unset.
func Get(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: run the suite through scripts/test.sh", name)
		}
		t.Skipf("%s is not set; scripts/test.sh starts the server and sets it", name)
	}
	return v
}

// List returns a comma-separated variable as a list (see Get).
func List(t testing.TB, name string) []string {
	t.Helper()
	return strings.Split(Get(t, name), ",")
}

// PID returns an integer variable such as SLUICE_REDIS_PID (see Get).
func PID(t testing.TB, name string) int {
	t.Helper()
	v := Get(t, name)
	pid, err := strconv.Atoi(v)
	if err != nil || pid <= 0 {
		t.Fatalf("%s=%q is not a PID", name, v)
	}
	return pid
}

// RedisAddr returns SLUICE_REDIS_ADDR, a standalone redis-server's host:port.
func RedisAddr(t testing.TB) string { t.Helper(); return Get(t, "SLUICE_REDIS_ADDR") }

// MemcachedAddr returns SLUICE_MEMCACHED_ADDR, a memcached's host:port.
func MemcachedAddr(t testing.TB) string { t.Helper(); return Get(t, "SLUICE_MEMCACHED_ADDR") }

// Timing marks a test whose assertions are about real elapsed time (a decision within its
// timeout plus 50 ms, a store path resuming within a second). scripts/test.sh runs the whole
// suite with SLUICE_TIMING=defer, which skips these tests, and then runs the packages that
// have them again one at a time, so no other package's tests compete for the CPUs while they
// measure. Run directly (go test), they always run.
func Timing(t testing.TB) {
	t.Helper()
	if os.Getenv("SLUICE_TIMING") == "defer" {
		t.Skip("real-time test: scripts/test.sh runs it in its serial timing phase")
	}
}

// Chaos reports whether SLUICE_CHAOS is set (scripts/chaos.sh sets it): the reliability tests
// then run their long forms, with more keys, rounds and time, each still bounded.
func Chaos() bool { return os.Getenv("SLUICE_CHAOS") != "" }

// LiveHeap returns the bytes of the heap still in use once garbage is collected, for tests
// asserting that memory stays flat.
func LiveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// MiB converts bytes to mebibytes, for test logs.
func MiB(b uint64) float64 { return float64(b) / (1 << 20) }
