package main

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store"
)

// TestStoreModeCombinations: serve and proxy check every store x mode x fallback cell of
// docs/MODES.md's table (held equal to store.CheckModeOn by store's TestModesTable) with
// their flags: an unsupported one is a usage error naming --mode and saying why, before
// anything is opened.
func TestStoreModeCombinations(t *testing.T) {
	for _, url := range []string{"memory", "redis://127.0.0.1:1/0", "rediss://:pw@127.0.0.1:1/0", "redis-cluster://127.0.0.1:1,127.0.0.1:2",
		"redis-sentinel://127.0.0.1:1/m", "memcached://127.0.0.1:1"} {
		for _, mode := range []string{"sync", "overlimit", "async"} {
			for _, fallback := range []string{"", "local", "fail_open", "fail_closed"} {
				f := sharedFlags{store: url, mode: mode, fallback: fallback}
				err, want := f.check(), store.CheckModeOn(url, mode)
				switch {
				case want == nil && err != nil:
					t.Errorf("%s %s %q: %v", url, mode, fallback, err)
				case want != nil && (err == nil || !strings.HasPrefix(err.Error(), "--mode: ") || !strings.Contains(err.Error(), want.Error())):
					t.Errorf("%s %s %q: %v, want --mode: %v", url, mode, fallback, err, want)
				case err != nil && strings.Contains(err.Error(), "pw"):
					t.Errorf("%s: the password in %v", url, err)
				}
			}
		}
	}
	for _, cmd := range [][]string{
		{"serve", "--store", "memcached://127.0.0.1:1", "--mode", "async", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"},
		{"proxy", "--store", "memcached://127.0.0.1:1", "--mode", "async", "--upstream", "http://127.0.0.1:1", "--config", "../../examples/proxy/rules.yaml", "--http-addr", "127.0.0.1:0"},
	} {
		code, _, errOut := runCLI(cmd...)
		if code != 2 || !strings.Contains(errOut, "--mode: mode async is not supported on memcached: async needs window counters") {
			t.Errorf("%s memcached async: exit %d, %q", cmd[0], code, errOut)
		}
	}
}
