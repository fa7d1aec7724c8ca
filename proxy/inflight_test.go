package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/sluicetest"
)

const inFlightProxyRules = `
domain: edge
descriptors:
  - key: generic_key
    value: slow
    max_in_flight: 2
proxy:
  rate_limits:
    - actions:
        - generic_key: {descriptor_value: slow}
`

// Issue 24 item 2: with max_in_flight, sluice proxy holds a slot per request until the
// upstream's response body is done: with two responses still streaming (headers received),
// a third request is answered 429 naming the descriptor, and once the bodies end the slots
// are back.
func TestProxyMaxInFlight(t *testing.T) {
	up := newUpstream(t)
	finish := make(chan struct{})
	up.mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first part\n")
		w.(http.Flusher).Flush()
		<-finish
		_, _ = io.WriteString(w, "last part\n")
	})
	p := startProxy(t, up, inFlightProxyRules)
	var bodies []io.ReadCloser
	for range 2 {
		resp, err := http.Get(p.base + "/slow")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("held request: %d", resp.StatusCode)
		}
		bodies = append(bodies, resp.Body)
	}
	resp, body := get(t, p.base+"/slow")
	var prob httplimit.ProblemDetails
	if resp.StatusCode != http.StatusTooManyRequests || json.Unmarshal([]byte(body), &prob) != nil ||
		len(prob.ViolatedPolicies) != 1 || prob.ViolatedPolicies[0] != "edge.generic_key_slow" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("third request while two bodies stream: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	close(finish)
	for _, b := range bodies {
		rest, err := io.ReadAll(b)
		b.Close()
		if err != nil || string(rest) != "first part\nlast part\n" {
			t.Errorf("body %q: %v", rest, err)
		}
	}
	// the slots come back once the proxy has copied the bodies to the end
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, body := get(t, p.base+"/slow")
		if resp.StatusCode == http.StatusOK && strings.HasPrefix(body, "first part") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots not back 10 s after the bodies ended: %d %s", resp.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A store that keeps no leases cannot enforce max_in_flight: the proxy does not start.
func TestProxyMaxInFlightNeedsLeases(t *testing.T) {
	up := newUpstream(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(inFlightProxyRules), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := proxy.New(proxy.Config{Upstream: up.URL, Addr: "127.0.0.1:0", AdminAddr: "-", RulesPath: path,
		ReloadInterval: -1, Store: &sluicetest.Recorder{}})
	if err == nil || !strings.Contains(err.Error(), "edge.generic_key_slow has a max_in_flight, but the store keeps no leases") {
		t.Fatalf("New: %v", err)
	}
}

// An adaptive max_in_flight refuses with 503 temporary-reduced-capacity: the upstream is
// overloaded, not the client over its quota.
func TestProxyAdaptiveInFlight(t *testing.T) {
	up := newUpstream(t)
	finish := make(chan struct{})
	up.mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		<-finish
	})
	rules := strings.Replace(inFlightProxyRules, "max_in_flight: 2", "max_in_flight: {adaptive: {floor: 1, ceiling: 1}}", 1)
	p := startProxy(t, up, rules)
	held, err := http.Get(p.base + "/slow")
	if err != nil || held.StatusCode != http.StatusOK {
		t.Fatalf("first request: %v %v", held, err)
	}
	resp, body := get(t, p.base+"/slow")
	var prob httplimit.ProblemDetails
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &prob) != nil ||
		prob.Type != httplimit.ProblemTemporaryReducedCapacity || len(prob.ViolatedPolicies) != 1 || prob.ViolatedPolicies[0] != "edge.generic_key_slow" {
		t.Errorf("over the adaptive limit: %d %s", resp.StatusCode, body)
	}
	close(finish)
	_, _ = io.ReadAll(held.Body)
	held.Body.Close()
}
