package proxy_test

import (
	"net/http"
	"testing"
)

// perClientClasses limits each client to 10 a minute, with the default criticality shares,
// and maps the X-Criticality header to the class descriptor (the Envoy way). The window
// slides: a fixed window paces the lower classes' shares over the window
// (algorithm.TakeHoldback), and the proxy decides on the wall clock.
const perClientClasses = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window, criticality: {}}
proxy:
  rate_limits:
    - actions: [{remote_address: {}}]
    - actions: [{request_headers: {header_name: X-Criticality, descriptor_key: criticality, skip_if_absent: true}}]
`

// TestCriticalityThroughTheProxy: the class a request carries in X-Criticality decides how
// much of the shared limit it may use: SHEDDABLE stops at half of it, CRITICAL_PLUS takes
// what is left.
func TestCriticalityThroughTheProxy(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, up, perClientClasses)
	status := func(class string) int {
		resp, _ := get(t, p.base+"/", "X-Criticality: "+class)
		return resp.StatusCode
	}
	sheddable := 0
	for range 10 {
		if status("SHEDDABLE") == http.StatusOK {
			sheddable++
		}
	}
	if sheddable != 5 {
		t.Errorf("SHEDDABLE passed %d of 10 on a limit of 10, want 5 (its 50%% share)", sheddable)
	}
	plus := 0
	for range 10 {
		if status("CRITICAL_PLUS") == http.StatusOK {
			plus++
		}
	}
	if plus != 5 {
		t.Errorf("CRITICAL_PLUS passed %d after SHEDDABLE's 5, want the 5 left", plus)
	}
}
