package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The regions suite (issue 37), black box: three redis-servers are three regions, each with
// its own sluice serve; every link from one region to another's Redis goes through a TCP
// proxy in this test that delays each byte (50-150 ms one way) and can be cut. A global
// limit (scope: global) is asked of the three serves at skewed rates that move from region
// to region, and the region ap is cut off from the others for a while. Escrow never admits
// more than the limit in a window, before, during or after the cut; async stays within its
// stated bound.

const (
	regionsTestLimit  = 100 // per window
	regionsTestPeriod = 2 * time.Second
)

// delayProxy forwards TCP connections to target, each byte delay late in each direction,
// and can be cut: its connections close and new ones are refused until it heals.
type delayProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

func startDelayProxy(t *testing.T, target string, delay time.Duration) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &delayProxy{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { _ = ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.handle(c)
		}
	}()
	return p
}

func (p *delayProxy) addr() string { return p.ln.Addr().String() }

// track records c as live, unless the proxy is cut (then it closes c).
func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *delayProxy) handle(c net.Conn) {
	if !p.track(c) {
		return
	}
	u, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(u) {
		_ = c.Close()
		return
	}
	go p.pipe(u, c)
	p.pipe(c, u)
}

// pipe copies src to dst, each chunk delay after it was read, in order.
func (p *delayProxy) pipe(dst, src net.Conn) {
	type chunk struct {
		due  time.Time
		data []byte
	}
	q := make(chan chunk, 1024)
	go func() {
		defer dst.Close()
		for ch := range q {
			time.Sleep(time.Until(ch.due))
			if _, err := dst.Write(ch.data); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{time.Now().Add(p.delay), append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			close(q)
			_ = src.Close()
			return
		}
	}
}

// setCut cuts the proxy (closing its connections) or heals it.
func (p *delayProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

// regionsRun is what one mode's run admitted: per region, the [sent, received] span of each
// admitted request.
type regionsRun struct {
	start    time.Time
	admitted [][][2]time.Duration
	asked    []int
}

func TestRegionsBlackBox(t *testing.T) {
	testenv.Timing(t)
	bin := fleetBinary(t)
	for _, mode := range []string{"escrow", "async"} {
		t.Run(mode, func(t *testing.T) { runRegionsBlackBox(t, bin, mode) })
	}
}

func runRegionsBlackBox(t *testing.T, bin, mode string) {
	names := []string{"eu", "us", "ap"}
	delay := [3][3]time.Duration{{0, 50 * time.Millisecond, 100 * time.Millisecond}, {50 * time.Millisecond, 0, 150 * time.Millisecond}, {100 * time.Millisecond, 150 * time.Millisecond, 0}}
	redis := make([]*testenv.RedisServer, len(names))
	for i := range redis {
		redis[i] = testenv.StartRedis(t)
	}
	// proxies[i][j]: region i's link to region j's Redis.
	var proxies [3][3]*delayProxy
	var cutLinks []*delayProxy
	for i := range names {
		for j := range names {
			if i != j {
				proxies[i][j] = startDelayProxy(t, redis[j].Addr(), delay[i][j]/2) // the proxy delays each way
				if i == 2 || j == 2 {
					cutLinks = append(cutLinks, proxies[i][j])
				}
			}
		}
	}
	dir := t.TempDir()
	rules := fmt.Sprintf("domain: regions\ndescriptors:\n  - key: tenant\n    rate_limit: {period: %v, requests_per_unit: %d, algorithm: fixed_window, scope: global}\n", regionsTestPeriod, regionsTestLimit)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	serves := make([]*served, len(names))
	for i, name := range names {
		var list []string
		for j, other := range names {
			addr := redis[j].Addr()
			if j != i {
				addr = proxies[i][j].addr()
			}
			list = append(list, other+"=redis://"+addr+"/0")
		}
		serves[i] = fleetServe(t, bin, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json", "--config", dir,
			"--store", "redis://"+redis[i].Addr()+"/0", "--region", name, "--regions", strings.Join(list, ","), "--regions-mode", mode,
			"--regions-coordinator", "eu", "--regions-epoch", "500ms", "--regions-interval", "100ms")
	}
	// Demand per region (per second) from each phase on; ap is cut off in the third.
	phases := []struct {
		at   time.Duration
		rate [3]float64
	}{{0, [3]float64{90, 20, 10}}, {4 * time.Second, [3]float64{20, 90, 20}}, {8 * time.Second, [3]float64{40, 40, 60}}, {14 * time.Second, [3]float64{20, 20, 90}}}
	cutFrom, cutTo, end := 8*time.Second, 14*time.Second, 20*time.Second
	run := &regionsRun{start: time.Now().Truncate(regionsTestPeriod).Add(regionsTestPeriod), admitted: make([][][2]time.Duration, 3), asked: make([]int, 3)}
	time.Sleep(time.Until(run.start))
	go func() {
		time.Sleep(time.Until(run.start.Add(cutFrom)))
		for _, p := range cutLinks {
			p.setCut(true)
		}
		time.Sleep(time.Until(run.start.Add(cutTo)))
		for _, p := range cutLinks {
			p.setCut(false)
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 37))
			req := &rlsv3.RateLimitRequest{Domain: "regions", Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "tenant", Value: "acme"}}}}}
			for {
				at := time.Since(run.start)
				if at >= end {
					return
				}
				rate := phases[0].rate[i]
				for _, p := range phases {
					if at >= p.at {
						rate = p.rate[i]
					}
				}
				time.Sleep(time.Duration(r.ExpFloat64() / rate * float64(time.Second)))
				sent := time.Since(run.start)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				resp, err := serves[i].client.ShouldRateLimit(ctx, req)
				cancel()
				got := time.Since(run.start)
				mu.Lock()
				run.asked[i]++
				if err == nil && resp.GetOverallCode() == rlsv3.RateLimitResponse_OK {
					run.admitted[i] = append(run.admitted[i], [2]time.Duration{sent, got})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, s := range serves {
		n := 0
		for _, line := range s.log() {
			if strings.Contains(line, "regions:") && n < 5 {
				t.Logf("%s: %s", names[i], line)
				n++
			}
		}
	}
	checkRegionsRun(t, mode, run, names, cutFrom, cutTo, end, delay)
}

// checkRegionsRun checks each window of the run: escrow never over the limit; async within
// its bound outside the cut. A request is in a window when both its sending and its answer
// are (the decision was between them): those straddling an edge are counted apart.
func checkRegionsRun(t *testing.T, mode string, run *regionsRun, names []string, cutFrom, cutTo, end time.Duration, delay [3][3]time.Duration) {
	t.Helper()
	windows := int(end / regionsTestPeriod)
	in := make([]int, windows)
	edge := make([]int, windows)
	byRegion := make([][3]int, windows)
	var cutAdmitted int
	for r, spans := range run.admitted {
		for _, s := range spans {
			w0, w1 := int(s[0]/regionsTestPeriod), int(s[1]/regionsTestPeriod)
			if w0 >= windows {
				continue
			}
			if w0 == w1 {
				in[w0]++
				byRegion[w0][r]++
			} else {
				edge[w0]++
			}
			if r == 2 && s[0] >= cutFrom+2*500*time.Millisecond+100*time.Millisecond && s[1] < cutTo {
				cutAdmitted++
			}
		}
	}
	// Async's bound outside the cut: the others' highest rates over two intervals and the
	// delay to them (90/s each at most here).
	var unseen float64
	for i := range names {
		var u float64
		for j := range names {
			if j != i {
				u += 90 * (200*time.Millisecond + delay[i][j]).Seconds()
			}
		}
		unseen = max(unseen, u)
	}
	asyncBound := regionsTestLimit + int(unseen) + 1
	var keys []int
	for w := range in {
		keys = append(keys, w)
	}
	sort.Ints(keys)
	for _, w := range keys {
		from := time.Duration(w) * regionsTestPeriod
		phase := "before the cut"
		switch {
		case from+regionsTestPeriod > cutFrom && from < cutTo:
			phase = "during the cut"
		case from >= cutTo:
			phase = "after the cut"
		}
		t.Logf("%s: window at %v (%s): %d admitted (by region %v), %d more at its edge", mode, from, phase, in[w], byRegion[w], edge[w])
		switch {
		case mode == "escrow" && in[w] > regionsTestLimit:
			t.Errorf("escrow: %d admitted in the window at %v (%s), limit %d", in[w], from, phase, regionsTestLimit)
		case mode == "async" && phase != "during the cut" && from < cutTo+regionsTestPeriod && from >= cutTo:
			// the window after the cut still holds what each side admitted unseen
		case mode == "async" && phase != "during the cut" && in[w] > asyncBound:
			t.Errorf("async: %d admitted in the window at %v (%s), bound %d", in[w], from, phase, asyncBound)
		}
	}
	if mode == "escrow" && cutAdmitted > 0 {
		t.Errorf("escrow: the region cut off admitted %d after its epochs ran out", cutAdmitted)
	}
	t.Logf("%s: asked %v, admitted %d in %d windows of %d (async bound outside the cut %d)", mode, run.asked, sum(in), windows, regionsTestLimit, asyncBound)
}

func sum(v []int) (s int) {
	for _, x := range v {
		s += x
	}
	return s
}
