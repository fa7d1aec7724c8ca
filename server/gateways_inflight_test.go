package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/memory"
)

const gatewayInFlightRules = `
domain: edge
descriptors:
  - key: generic_key
    value: slow
    max_in_flight: 1
  - key: generic_key
    value: brief
    max_in_flight: {limit: 1, lease: 50ms}
proxy:
  rate_limits:
    - actions:
        - request_headers: {header_name: X-Which, descriptor_key: generic_key}
`

// Issue 35: with --gateway-in-flight (rls.Config.InFlight), a door holds an admitted
// request's slot under the Sluice-Lease it answers: the next request is refused 429 naming
// the limit until POST /v1/leases/release gives the slot back (204, then 404: released
// once), or until the limit's lease ends when nobody releases it.
func TestForwardAuthInFlight(t *testing.T) {
	mem, err := memory.New() // leases: the harness's counting store keeps none
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	h := start(t, gatewayInFlightRules, func(c *server.Config) { c.InFlight, c.Store = true, mem })
	names := []string{"X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/", "X-Which", "slow"}
	first := forwardAuth(t, h, "127.0.0.1", "/v1/forward-auth/edge", names...)
	lease := first.header.Get(server.LeaseHeader)
	if first.status != http.StatusOK || len(lease) != 32 {
		t.Fatalf("first request: %d, %s %q; want 200 and a lease", first.status, server.LeaseHeader, lease)
	}
	if r := forwardAuth(t, h, "127.0.0.1", "/v1/forward-auth/edge", names...); r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "edge.generic_key_slow") {
		t.Errorf("second request, the slot held: %d %q, want 429 naming the limit", r.status, r.body)
	}
	release := func(id string) int {
		req, _ := http.NewRequest(http.MethodPost, h.base+"/v1/leases/release", nil)
		req.Header.Set(server.LeaseHeader, id)
		resp, err := client("127.0.0.1").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := release(lease); got != http.StatusNoContent {
		t.Errorf("release: %d, want 204", got)
	}
	if got := release(lease); got != http.StatusNotFound {
		t.Errorf("second release: %d, want 404", got)
	}
	if r := forwardAuth(t, h, "127.0.0.1", "/v1/forward-auth/edge", names...); r.status != http.StatusOK {
		t.Errorf("after the release: %d, want 200", r.status)
	}
	brief := []string{"X-Forwarded-Method", "GET", "X-Forwarded-Uri", "/", "X-Which", "brief"}
	if r := forwardAuth(t, h, "127.0.0.1", "/v1/forward-auth/edge", brief...); r.status != http.StatusOK {
		t.Fatalf("brief: %d, want 200", r.status)
	}
	testenv.Eventually(t, 10*time.Second, "the unreleased slot back after its 50ms lease", func() bool {
		return forwardAuth(t, h, "127.0.0.1", "/v1/forward-auth/edge", brief...).status == http.StatusOK
	})
}
