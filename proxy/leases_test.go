package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/store/memory"
)

const longLeaseRules = `
domain: edge
descriptors:
  - key: generic_key
    value: slow
    max_in_flight: {limit: 2, lease: 10m}
proxy:
  rate_limits:
    - actions:
        - generic_key: {descriptor_value: slow}
`

// deleteLeases sends DELETE /v1/leases with body to the admin address.
func deleteLeases(t *testing.T, p *running, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, p.admin+"/v1/leases", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, text := send(t, req)
	return resp.StatusCode, text
}

// TestProxyClearLeases (issue 31 item 9): an operator frees the slots of a descriptor at once
// with DELETE /v1/leases on the admin address, naming the descriptor as the rules do: two
// requests hold both slots of a 10-minute lease, a third is refused; after the clear it is
// served. A malformed body, or a descriptor no max_in_flight matches, is a 400 that clears
// nothing.
func TestProxyClearLeases(t *testing.T) {
	up := newUpstream(t)
	finish := make(chan struct{})
	up.mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		<-finish
	})
	p := startProxy(t, up, longLeaseRules)
	var bodies []io.ReadCloser
	for range 2 {
		resp, err := http.Get(p.base + "/slow")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("held request: %v %v", resp, err)
		}
		bodies = append(bodies, resp.Body)
	}
	defer func() {
		close(finish)
		for _, b := range bodies {
			_, _ = io.ReadAll(b)
			b.Close()
		}
	}()
	if resp, body := get(t, p.base+"/slow"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third request: %d %s", resp.StatusCode, body)
	}
	for body, want := range map[string]string{
		`{"domain":"edge","entries":[{"key":"generic_key","value":"fast"}]}`:  "no limit with a max_in_flight",
		`{"domain":"other","entries":[{"key":"generic_key","value":"slow"}]}`: "not in the rules",
		`{"domain":"edge","entries":[{"key":"generic_key"}],"colour":1}`:      "unknown field",
		`not json`: "body",
	} {
		if code, text := deleteLeases(t, p, body); code != http.StatusBadRequest || !strings.Contains(text, want) {
			t.Errorf("%s: %d %s, want 400 saying %q", body, code, text, want)
		}
	}
	code, text := deleteLeases(t, p, `{"domain":"edge","entries":[{"key":"generic_key","value":"slow"}]}`)
	if code != http.StatusOK || strings.TrimSpace(text) != `{"cleared":2}` {
		t.Fatalf("clear: %d %s", code, text)
	}
	held, err := http.Get(p.base + "/slow")
	if err != nil || held.StatusCode != http.StatusOK {
		t.Fatalf("after the clear: %v %v", held, err)
	}
	bodies = append(bodies, held.Body)
}

// releaseFailing is a memory store whose lease releases fail while down is set.
type releaseFailing struct {
	*memory.Store
	down atomic.Bool
}

func (s *releaseFailing) ReleaseLease(ctx context.Context, key string, id sluice.LeaseID) error {
	if s.down.Load() {
		return fmt.Errorf("test: %w: %w", sluice.ErrStoreUnavailable, context.DeadlineExceeded)
	}
	return s.Store.ReleaseLease(ctx, key, id)
}

// TestProxyCountsFailedReleases (issue 31 item 9): a release of an in-flight slot the store
// cannot take is counted (sluice_proxy_lease_release_failures_total) and logged, without the
// key: the slot stays held until its lease expires.
func TestProxyCountsFailedReleases(t *testing.T) {
	up := newUpstream(t)
	mem, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	st := &releaseFailing{Store: mem}
	var logs testenv.LogBuffer
	p := startProxy(t, up, inFlightProxyRules, func(c *proxy.Config) { c.Store = st; c.Logger = newJSONLogger(&logs) })
	st.down.Store(true)
	if resp, body := get(t, p.base+"/slow"); resp.StatusCode != http.StatusOK {
		t.Fatalf("request: %d %s", resp.StatusCode, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, metrics := get(t, p.admin+"/metrics")
		if strings.Contains(metrics, "sluice_proxy_lease_release_failures_total 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed release was not counted: %s", metrics)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l := logs.String(); !strings.Contains(l, "in-flight slot not released") || !strings.Contains(l, `"cause":"timeout"`) || strings.Contains(l, "slow") {
		t.Errorf("log: %s", l)
	}
}

// TestProxyLeaseBound (issue 31 item 9): the proxy refuses rules whose lease is longer than
// Config.MaxLease (by default config.DefaultMaxLease, 10 minutes), naming the field, and takes
// them under a higher bound.
func TestProxyLeaseBound(t *testing.T) {
	up := newUpstream(t)
	rules := strings.Replace(longLeaseRules, "lease: 10m", "lease: 1h", 1)
	path := t.TempDir() + "/rules.yaml"
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := proxy.Config{Upstream: up.URL, Addr: "127.0.0.1:0", AdminAddr: "-", RulesPath: path, ReloadInterval: -1}
	if _, err := proxy.New(cfg); err == nil || !strings.Contains(err.Error(), "descriptors[0].max_in_flight.lease: lease 1h0m0s is longer than the 10m0s") {
		t.Fatalf("a 1 h lease under the default bound: %v", err)
	}
	cfg.MaxLease = 2 * time.Hour
	p, err := proxy.New(cfg)
	if err != nil {
		t.Fatalf("a 1 h lease under a 2 h bound: %v", err)
	}
	_ = p.Close()
}
