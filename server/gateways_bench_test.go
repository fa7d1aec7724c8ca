package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server"
)

// What a gateway's door costs per request (issue 35): the same GET from one client, one
// request at a time on a kept-alive connection, to the same app, through
//
//	nginx                nginx alone (proxy_pass)
//	nginx_limit_req      nginx with its own per-instance limiter (limit_req, per client address)
//	nginx_sluice         the README's NGINX snippet: auth_request to sluice serve's forward-auth
//	caddy                caddy alone (reverse_proxy)
//	caddy_sluice         the README's Caddyfile: forward_auth to sluice serve
//	sluice_proxy         sluice proxy, the same rules (no gateway: Sluice is the proxy)
//
// with the README's rules at a limit never reached (every request takes the admitted path),
// Sluice on the memory store. The sides take turns in blocks of 100 requests, the first of
// each round alternating. Reported per side: p50 and p99 of the round trip, and the CPU per
// request of this process (client, app, Sluice) plus the gateway's process (/proc); added-*
// are nginx_sluice minus nginx, nginx_limit_req minus nginx, caddy_sluice minus caddy.
//
//	SLUICE_NGINX=$(command -v nginx) SLUICE_CADDY=$(command -v caddy) go test -run '^$' -bench GatewayCost -count 6 -benchtime 100x ./server
func BenchmarkGatewayCost(b *testing.B) {
	rules := testenv.Replace(b, testenv.Block(b, readme, "Where it fits", "yaml", 0), "requests_per_unit: 100}", "requests_per_unit: 1000000000}")
	sluice, err := server.New(server.Config{Config: rls.Config{Rules: compile(b, rules), ReloadInterval: -1}, GRPCAddr: "-", HTTPAddr: "127.0.0.1:0", TrustedProxies: []string{"127.0.0.1"}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go func() { _ = sluice.Serve(ctx) }()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from the upstream")
	}))
	b.Cleanup(up.Close)
	app := strings.TrimPrefix(up.URL, "http://")
	snippet := func(file, title, lang string, gateway string) string {
		text := testenv.Block(b, file, title, lang, 0)
		_, port, _ := strings.Cut(gateway, ":")
		return testenv.Replace(b, strings.NewReplacer("127.0.0.1:8000", gateway, ":8000 {", ":"+port+" {").Replace(text),
			"127.0.0.1:8080", sluice.HTTPAddr(), "127.0.0.1:3000", app)
	}
	var sides []*gatewaySide
	add := func(name string, g *testenv.Gateway) {
		sides = append(sides, newGatewaySide(b, name, "http://"+g.Addr, g.CPU))
	}
	addr := testenv.FreeAddr(b)
	add("nginx", testenv.StartNginx(b, addr, "server {\n    listen "+addr+";\n    location / {\n        proxy_pass http://"+app+";\n    }\n}\n"))
	addr = testenv.FreeAddr(b)
	add("nginx_limit_req", testenv.StartNginx(b, addr, "limit_req_zone $binary_remote_addr zone=perip:10m rate=100000r/s;\nserver {\n    listen "+addr+
		";\n    location / {\n        limit_req zone=perip burst=100000 nodelay;\n        proxy_pass http://"+app+";\n    }\n}\n"))
	addr = testenv.FreeAddr(b)
	add("nginx_sluice", testenv.StartNginx(b, addr, snippet(readme, "NGINX", "nginx", addr)))
	addr = testenv.FreeAddr(b)
	_, port, _ := strings.Cut(addr, ":")
	add("caddy", testenv.StartCaddy(b, addr, ":"+port+" {\n\tbind 127.0.0.1\n\treverse_proxy "+app+"\n}\n"))
	addr = testenv.FreeAddr(b)
	add("caddy_sluice", testenv.StartCaddy(b, addr, snippet(readme, "Caddy", "caddyfile", addr)))
	p, err := proxy.New(proxy.Config{Upstream: "http://" + app, Addr: "127.0.0.1:0", AdminAddr: "-", Rules: compile(b, rules)})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = p.Serve(ctx) }()
	sides = append(sides, newGatewaySide(b, "sluice_proxy", "http://"+p.Addr(), nil))

	const block = 100
	for _, s := range sides { // warm the connections
		for range block {
			s.get()
		}
	}
	round := 0
	for b.Loop() {
		for k := range sides {
			s := sides[(k+round)%len(sides)]
			cpu0 := s.cpu()
			for range block {
				start := time.Now()
				s.get()
				s.lat = append(s.lat, time.Since(start))
			}
			s.cpuUsed += s.cpu() - cpu0
			s.served += block
		}
		round++
	}
	b.StopTimer()
	byName := map[string]*gatewaySide{}
	for _, s := range sides {
		s.p50, s.p99, s.cpuPer = s.stats()
		byName[s.name] = s
		b.ReportMetric(s.p50, s.name+"-p50-µs")
		b.ReportMetric(s.p99, s.name+"-p99-µs")
		b.ReportMetric(s.cpuPer, s.name+"-cpu-µs/req")
	}
	for _, pair := range [][2]string{{"nginx_sluice", "nginx"}, {"nginx_limit_req", "nginx"}, {"caddy_sluice", "caddy"}} {
		s, base := byName[pair[0]], byName[pair[1]]
		b.ReportMetric(s.p50-base.p50, s.name+"-added-p50-µs")
		b.ReportMetric(s.cpuPer-base.cpuPer, s.name+"-added-cpu-µs/req")
	}
}

// gatewaySide is one way to the app under measurement.
type gatewaySide struct {
	name             string
	get              func()
	cpu              func() time.Duration
	lat              []time.Duration
	cpuUsed          time.Duration
	served           int
	p50, p99, cpuPer float64
	gatewayCPU       func() time.Duration
}

func newGatewaySide(b *testing.B, name, base string, gatewayCPU func() time.Duration) *gatewaySide {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	b.Cleanup(c.CloseIdleConnections)
	s := &gatewaySide{name: name, gatewayCPU: gatewayCPU}
	s.cpu = func() time.Duration {
		d := selfCPU()
		if s.gatewayCPU != nil {
			d += s.gatewayCPU()
		}
		return d
	}
	s.get = func() {
		resp, err := c.Get(base + "/api/items")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: status %d", name, resp.StatusCode)
		}
	}
	return s
}

// stats returns the p50 and p99 latencies and the CPU per request, in microseconds.
func (s *gatewaySide) stats() (p50, p99, cpu float64) {
	slices.Sort(s.lat)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return us(s.lat[len(s.lat)/2]), us(s.lat[len(s.lat)*99/100]), us(s.cpuUsed) / float64(s.served)
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
