package proxy_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// everyone allows 100 requests a minute to all clients together.
const everyone = `
domain: edge
descriptors:
  - key: generic_key
    value: all
    rate_limit: {unit: minute, requests_per_unit: 100}
proxy:
  rate_limits:
    - actions: [{generic_key: {descriptor_value: all}}]
`

// TestStreamingArrivesChunkByChunk: the upstream writes the next chunk only once the client
// has read the previous one through the proxy, so the response can only complete if every
// chunk is flushed as soon as it is written.
func TestStreamingArrivesChunkByChunk(t *testing.T) {
	up := newUpstream(t)
	read := make(chan struct{})
	up.mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		for i := range 3 {
			_, _ = io.WriteString(w, "chunk"+string(rune('0'+i))+"\n")
			http.NewResponseController(w).Flush()
			select {
			case <-read:
			case <-time.After(10 * time.Second):
				return
			case <-r.Context().Done():
				return
			}
		}
	})
	p := startProxy(t, up, everyone)
	resp, err := http.Get(p.base + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		got := make(chan string, 1)
		go func() { line, _ := br.ReadString('\n'); got <- line }()
		select {
		case line := <-got:
			if want := "chunk" + string(rune('0'+i)) + "\n"; line != want {
				t.Fatalf("chunk %d: %q, want %q", i, line, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("chunk %d did not arrive before the upstream wrote the next one", i)
		}
		read <- struct{}{}
	}
}

// TestWebSocketEcho: an upgrade passes through the proxy, which counts it like any request,
// and bytes flow both ways on the upgraded connection.
func TestWebSocketEcho(t *testing.T) {
	up := newUpstream(t)
	up.mux.HandleFunc("/ws", wsEcho)
	p := startProxy(t, up, everyone)
	conn, br, resp := dialUpgrade(t, p.Addr(), "/ws")
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	if got := resp.Header.Get("RateLimit"); got != `"edge.generic_key_all";r=99;t=120` {
		t.Errorf("upgrade response: RateLimit %q, want the limit's", got)
	}
	for _, msg := range []string{"hello\n", "through the proxy\n"} {
		if _, err := io.WriteString(conn, msg); err != nil {
			t.Fatal(err)
		}
		line, err := br.ReadString('\n')
		if err != nil || line != msg {
			t.Fatalf("echo %q, %v; want %q", line, err, msg)
		}
	}
}

// TestBodiesAndTrailersPass: a request body and its trailers reach the upstream, and the
// response's trailers reach the client.
func TestBodiesAndTrailersPass(t *testing.T) {
	up := newUpstream(t)
	up.mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-Checksum")
		_, _ = w.Write(body)
		w.Header().Set("X-Checksum", "sum:"+r.Trailer.Get("X-Request-Sum"))
	})
	p := startProxy(t, up, everyone)
	big := strings.Repeat("0123456789", 100_000) // 1 MB
	req, _ := http.NewRequest(http.MethodPost, p.base+"/echo", io.NopCloser(strings.NewReader(big)))
	req.ContentLength = -1 // chunked, so that trailers can follow
	req.Trailer = http.Header{"X-Request-Sum": {"abc"}}
	resp, body := send(t, req)
	if body != big {
		t.Errorf("body: %d bytes back, want %d", len(body), len(big))
	}
	if got := resp.Trailer.Get("X-Checksum"); got != "sum:abc" {
		t.Errorf("trailer X-Checksum %q, want sum:abc", got)
	}
}

// TestXForwardedForAppended: the proxy appends its peer to the chain the client sent, so the
// upstream can walk it with its own trusted proxies.
func TestXForwardedForAppended(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, up, everyone)
	if resp, body := get(t, p.base+"/"); resp.StatusCode != http.StatusOK || up.xff() != "127.0.0.1" {
		t.Errorf("no chain: status %d %q, upstream saw X-Forwarded-For %q, want 127.0.0.1", resp.StatusCode, body, up.xff())
	}
	get(t, p.base+"/", "X-Forwarded-For: 203.0.113.7, 10.0.0.1")
	if got, want := up.xff(), "203.0.113.7, 10.0.0.1, 127.0.0.1"; got != want {
		t.Errorf("upstream saw X-Forwarded-For %q, want %q", got, want)
	}
}
