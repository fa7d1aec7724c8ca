package bench

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/stores"
)

// The overhead of `sluice proxy` (issue 12): the same GET through a bare
// httputil.ReverseProxy and through sluice proxy (a per-client-address limit that admits
// everything, so the allowed path is measured) to the same local upstream, one request at a
// time on a kept-alive connection, in the same run. Reported per request: the round trip's
// p50 and p99 and the CPU time of the whole process (client, proxy and upstream; the same
// client and upstream on both sides, so the difference is the proxy's).
//
//	cd bench && go test -run '^$' -bench Proxy -count 6 -benchtime 20000x
//
// With SLUICE_REDIS_ADDR set, sluice_redis decides on that Redis instead of memory.

const proxyBenchRules = `
domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000000}
proxy:
  rate_limits:
    - actions: [{remote_address: {}}]
`

func BenchmarkProxy(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from the upstream")
	}))
	defer up.Close()
	b.Run("bare", func(b *testing.B) { benchProxied(b, bareProxy(b, up.URL)) })
	b.Run("sluice_memory", func(b *testing.B) { benchProxied(b, sluiceProxy(b, up.URL, stores.Config{})) })
	if addr := os.Getenv("SLUICE_REDIS_ADDR"); addr != "" {
		b.Run("sluice_redis", func(b *testing.B) {
			benchProxied(b, sluiceProxy(b, up.URL, stores.Config{URL: "redis://" + addr, Prefix: "bench:proxy:"}))
		})
	}
}

// upstreamTransport is the transport both proxies use to the upstream.
func upstreamTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
	return t
}

// bareProxy serves a ReverseProxy set up as sluice proxy sets up its own, without limits.
func bareProxy(b *testing.B, upstream string) string {
	u, _ := url.Parse(upstream)
	rp := &httputil.ReverseProxy{Transport: upstreamTransport(), Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
		pr.SetXForwarded()
	}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: rp}
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(func() { _ = srv.Close() })
	return "http://" + lis.Addr().String()
}

func sluiceProxy(b *testing.B, upstream string, sc stores.Config) string {
	doc, err := config.Decode("bench.yaml", []byte(proxyBenchRules))
	if err != nil {
		b.Fatal(err)
	}
	rules, err := config.Compile(doc)
	if err != nil {
		b.Fatal(err)
	}
	p, err := proxy.New(proxy.Config{Upstream: upstream, Addr: "127.0.0.1:0", AdminAddr: "-", Rules: rules,
		StoreConfig: sc, Transport: upstreamTransport()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Serve(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	return "http://" + p.Addr()
}

// benchProxied sends b.N GETs one after the other and reports their latency percentiles and
// the process's CPU time per request.
func benchProxied(b *testing.B, base string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	get := func() {
		resp, err := client.Get(base + "/api/items")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	for range 200 { // warm the connections and the keys
		get()
	}
	lat := make([]time.Duration, 0, b.N)
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		get()
		lat = append(lat, time.Since(t))
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(len(lat)), "cpu-µs/req")
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
