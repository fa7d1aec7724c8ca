package server_test

import (
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/memory"
)

const layeredRules = `
domain: api
descriptors:
  - key: tenant
    rate_limits:
      - {unit: minute, requests_per_unit: 5, name: business_quota}
      - {unit: minute, requests_per_unit: 3, scope: local, name: instance_guard}
`

// Two instances share the cluster store; each has its own local guard. The guard stops one
// instance at 3, the cluster quota stops the fleet at 5, and a request denied by either
// consumes from neither.
func TestLayeredClusterAndLocalLimits(t *testing.T) {
	a := start(t, layeredRules) // the guards run on the real clock: nothing here waits a minute
	b := start(t, layeredRules, func(c *server.Config) { c.Store = a.store })
	code := func(h *harness) rlsv3.RateLimitResponse_Code {
		return h.ask(t, "api", desc("tenant", "acme")).OverallCode
	}
	for i := range 3 {
		if c := code(a); c != codeOK {
			t.Fatalf("a request %d: %v, want OK", i, c)
		}
	}
	for i := range 4 { // the local guard of a: denied, nothing taken from the cluster
		if c := code(a); c != codeOver {
			t.Fatalf("a request %d past its guard: %v, want OVER_LIMIT", 3+i, c)
		}
	}
	for i := range 2 { // b has its own guard; the cluster has 2 left
		if c := code(b); c != codeOK {
			t.Fatalf("b request %d: %v, want OK (the cluster quota has 5-3 left)", i, c)
		}
	}
	r := b.ask(t, "api", desc("tenant", "acme"))
	if r.OverallCode != codeOver || r.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("b past the cluster quota: %v", r)
	}
	// The cluster store holds only the cluster limit's key: the guard never reached it.
	if n := a.store.Store.(*memory.Store).Len(); n != 1 {
		t.Errorf("the shared store holds %d keys, want 1 (the guard's keys stay in each instance)", n)
	}
	// the key form with the name of the limit counts on the same counters
	status, body := a.post(t, "/v1/allow", `{"key":"api|tenant=acme","rule":"business_quota"}`)
	if status != 200 || !strings.Contains(body, `"allowed":false`) {
		t.Errorf("key form on the layered limit: %d %s", status, body)
	}
}

const (
	codeOK   = rlsv3.RateLimitResponse_OK
	codeOver = rlsv3.RateLimitResponse_OVER_LIMIT
)
