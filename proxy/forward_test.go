package proxy_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/proxy"
)

// TestForwardedKeptAndAppended: the Forwarded header the client sent reaches the upstream,
// with this hop's element appended (RFC 7239); X-Forwarded-For is appended to as before.
func TestForwardedKeptAndAppended(t *testing.T) {
	up := newUpstream(t)
	up.mux.HandleFunc("/fwd", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Join(r.Header.Values("Forwarded"), "\n"))
	})
	p := startProxy(t, up, everyone)
	host := strings.TrimPrefix(p.base, "http://")
	hop := `for=127.0.0.1;host="` + host + `";proto=http`
	if _, got := get(t, p.base+"/fwd"); got != hop {
		t.Errorf("without Forwarded: upstream saw %q, want %q", got, hop)
	}
	sent := `for=192.0.2.60;proto=https;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"`
	if _, got := get(t, p.base+"/fwd", "Forwarded: "+sent, "X-Forwarded-For: 203.0.113.7"); got != sent+", "+hop {
		t.Errorf("upstream saw Forwarded %q, want %q", got, sent+", "+hop)
	}
	if got, want := up.xff(), "203.0.113.7, 127.0.0.1"; got != want {
		t.Errorf("upstream saw X-Forwarded-For %q, want %q", got, want)
	}
}

// silentUpstream accepts connections and never answers; it returns its URL.
func silentUpstream(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); lis.Close() })
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			go func() { <-done; conn.Close() }()
			go func() { _, _ = io.Copy(io.Discard, conn) }()
		}
	}()
	return "http://" + lis.Addr().String()
}

// getWithin GETs url, giving up after 30 s (without the timeouts, the proxy never answers):
// it returns the response, what arrived of its body, and the error that cut the body.
func getWithin(t *testing.T, url string) (*http.Response, string, error) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// TestSilentUpstreamIs504: an upstream that accepts and never answers is a 504 problem
// within the response-header timeout, counted; the client is not left hanging.
func TestSilentUpstreamIs504(t *testing.T) {
	up := newUpstream(t)
	silent := silentUpstream(t)
	p := startProxy(t, up, everyone, func(c *proxy.Config) {
		c.Upstream = silent
		c.ResponseHeaderTimeout = 200 * time.Millisecond
	})
	start := time.Now()
	resp, body, _ := getWithin(t, p.base+"/slow")
	took := time.Since(start)
	t.Logf("504 after %v (timeout 200 ms)", took)
	if took > 10*time.Second {
		t.Errorf("answered after %v, want about the 200 ms timeout", took)
	}
	if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(body, `"status":504`) {
		t.Errorf("status %d %q %s, want a 504 problem", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	_, metrics := get(t, p.admin+"/metrics")
	for _, m := range []string{`sluice_proxy_upstream_timeouts_total{phase="response_header"} 1`, `sluice_proxy_upstream_errors_total 0`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %s", m)
		}
	}
}

// TestSilentResponseBodyIsCut: an upstream that sends its headers and a first chunk, then
// nothing, has its response aborted after the idle timeout, counted.
func TestSilentResponseBodyIsCut(t *testing.T) {
	up := newUpstream(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	up.mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	p := startProxy(t, up, everyone, func(c *proxy.Config) { c.UpstreamIdleTimeout = 200 * time.Millisecond })
	start := time.Now()
	_, body, err := getWithin(t, p.base+"/stall")
	took := time.Since(start)
	t.Logf("response aborted after %v (idle timeout 200 ms): %v", took, err)
	if err == nil || body != "first" || took > 10*time.Second {
		t.Errorf("body %q, err %v after %v: want the first chunk, then an aborted response at about 200 ms", body, err, took)
	}
	waitFor(t, func() bool {
		_, metrics := get(t, p.admin+"/metrics")
		return strings.Contains(metrics, `sluice_proxy_upstream_timeouts_total{phase="idle"} 1`)
	})
}
