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
	"testing"
	"testing/fstest"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/store"
)

// The overhead of `sluice proxy` (issue 12): the same GET through a bare
// httputil.ReverseProxy and through sluice proxy (a per-client-address limit that admits
// everything, so the allowed path is measured) to the same local upstream, one request at a
// time on a kept-alive connection. The proxies take turns in blocks of 100 requests (the
// first of each round alternating), so they share the machine's state within a run. Reported
// per proxy: the round trip's p50 and p99, and the CPU time of the whole process per request
// (client, proxy and upstream: the same client and upstream on every side, so differences
// are the proxies'); added-* are sluice minus bare.
//
//	cd bench && go test -run '^$' -bench ProxyOverhead -count 6 -benchtime 100x
//
// With SLUICE_REDIS_ADDR set, sluice_redis (deciding on that Redis) takes turns too.

const proxyBenchRules = `
domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000000}
proxy:
  rate_limits:
    - actions: [{remote_address: {}}]
`

// proxied is one proxy under measurement: its client, latencies and CPU time.
type proxied struct {
	name   string
	get    func()
	lat    []time.Duration
	cpu    time.Duration
	served int
}

func BenchmarkProxyOverhead(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from the upstream")
	}))
	defer up.Close()
	sides := []*proxied{
		newProxied(b, "bare", bareProxy(b, up.URL)),
		newProxied(b, "sluice_memory", sluiceProxy(b, up.URL, store.Config{})),
	}
	if addr := os.Getenv("SLUICE_REDIS_ADDR"); addr != "" {
		sides = append(sides, newProxied(b, "sluice_redis", sluiceProxy(b, up.URL, store.Config{Backend: store.Backend{URL: "redis://" + addr, Prefix: "bench:proxy:"}})))
	}
	const block = 100
	for _, s := range sides { // warm the connections and the keys
		for range block {
			s.get()
		}
	}
	round := 0
	for b.Loop() {
		for k := range sides {
			s := sides[(k+round)%len(sides)]
			cpu0 := processCPU()
			for range block {
				t := time.Now()
				s.get()
				s.lat = append(s.lat, time.Since(t))
			}
			s.cpu += processCPU() - cpu0
			s.served += block
		}
		round++
	}
	b.StopTimer()
	bare := sides[0]
	p50, p99, cpu := bare.stats()
	for _, s := range sides {
		s50, s99, scpu := s.stats()
		b.ReportMetric(s50, s.name+"-p50-µs")
		b.ReportMetric(s99, s.name+"-p99-µs")
		b.ReportMetric(scpu, s.name+"-cpu-µs/req")
		if s != bare {
			b.ReportMetric(s50-p50, s.name+"-added-p50-µs")
			b.ReportMetric(s99-p99, s.name+"-added-p99-µs")
			b.ReportMetric(scpu-cpu, s.name+"-added-cpu-µs/req")
		}
	}
}

func newProxied(b *testing.B, name, base string) *proxied {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	b.Cleanup(client.CloseIdleConnections)
	return &proxied{name: name, get: func() {
		resp, err := client.Get(base + "/api/items")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: status %d", name, resp.StatusCode)
		}
	}}
}

// stats returns the p50 and p99 latencies and the CPU time per request, in microseconds.
func (s *proxied) stats() (p50, p99, cpu float64) {
	slices.Sort(s.lat)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return us(s.lat[len(s.lat)/2]), us(s.lat[len(s.lat)*99/100]), us(s.cpu) / float64(s.served)
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

func sluiceProxy(b *testing.B, upstream string, sc store.Config) string {
	rules, err := config.LoadFS(fstest.MapFS{"bench.yaml": {Data: []byte(proxyBenchRules)}}, "bench.yaml")
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
