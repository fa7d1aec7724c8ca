package main

import (
	"strings"
	"testing"
)

// TestSRVRefreshFlagChecked: --store-srv-refresh without MEMCACHE_SRV's store, or negative,
// stops serve with an error naming the flag.
func TestSRVRefreshFlagChecked(t *testing.T) {
	for _, refresh := range []string{"30s", "-1s"} {
		code, _, errOut := runCLI("serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--store-srv-refresh", refresh)
		if code != 2 || !strings.Contains(errOut, "--store-srv-refresh") {
			t.Errorf("--store-srv-refresh %s: exit %d, stderr %q; want 2 naming the flag", refresh, code, errOut)
		}
	}
}
