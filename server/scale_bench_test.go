package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/memory"
)

// scaleRules is a rules document of n limits: one descriptor value per tenant under one key,
// as a per-customer rules file or an Envoy Gateway policy of many clients has them. rpu
// changes every limit (a reload that keeps nothing) when it changes.
func scaleRules(n, rpu int) string {
	var b strings.Builder
	b.Grow(n * 80)
	b.WriteString("domain: scale\ndescriptors:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - key: tenant\n    value: t%d\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", i, rpu)
	}
	return b.String()
}

// pushSource is a rules source the benchmark feeds: each rules set it receives is applied,
// and the time apply took is sent back.
type pushSource struct {
	in   chan *config.Config
	took chan time.Duration
}

func (p *pushSource) Run(ctx context.Context, apply func(*config.Config), _ func(error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-p.in:
			start := time.Now()
			apply(c)
			p.took <- time.Since(start)
		}
	}
}

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkRuleSet100k measures a rule set of 100,000 limits (issue 31 item 4): the time to
// compile the YAML into rules, the heap the compiled rules hold per limit, the heap the
// server holds per limit (engine snapshot and metrics), the size of /metrics before any
// traffic and after one decision on 1% of the limits, the time a reload of the same rules and
// of changed rules takes to be in force, and the longest decision while a reload runs.
// SLUICE_SCALE_LIMITS sets another number of limits. Run it once: go test -run '^$' -bench BenchmarkRuleSet100k -benchtime 1x ./server
func BenchmarkRuleSet100k(b *testing.B) {
	n := 100_000
	if v := os.Getenv("SLUICE_SCALE_LIMITS"); v != "" { // a smaller set, e.g. to compare with a slow build
		n, _ = strconv.Atoi(v)
	}
	for range b.N {
		ruleSet(b, n)
	}
}

func ruleSet(b *testing.B, n int) {
	compile := func(rpu int) *config.Config {
		doc, err := config.Decode("scale.yaml", []byte(scaleRules(n, rpu)))
		if err != nil {
			b.Fatal(err)
		}
		c, err := config.Compile(doc)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	h0 := heapNow()
	start := time.Now()
	first := compile(100)
	compileTook := time.Since(start)
	h1 := heapNow()
	if got := len(first.Limits()); got != n {
		b.Fatalf("%d limits, want %d", got, n)
	}
	mem, err := memory.New()
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Close()
	src := &pushSource{in: make(chan *config.Config), took: make(chan time.Duration)}
	s, err := server.New(server.Config{Config: rls.Config{Rules: first, RulesSource: src, Store: mem, ReloadInterval: -1},
		GRPCAddr: "-", HTTPAddr: "-"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h2 := heapNow()
	scrape := func() int {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(s.Registry(), promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.Len()
	}
	idle := scrape()
	eng := s.Engine()
	decide := func(i int) time.Duration {
		req := rls.Request{Domain: "scale", Descriptors: []rls.Descriptor{{Entries: []rls.Entry{{Key: "tenant", Value: "t" + strconv.Itoa(i)}}}}}
		var ans rls.Answer
		t := time.Now()
		if err := eng.Decide(context.Background(), &req, &ans); err != nil {
			b.Fatal(err)
		}
		return time.Since(t)
	}
	for i := 0; i < n; i += 100 {
		decide(i)
	}
	used := scrape()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go eng.Run(ctx)
	reload := func(c *config.Config) (took, worst time.Duration, during int64) {
		var stop atomic.Bool
		var wg sync.WaitGroup
		var worstNS, count atomic.Int64
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				d := decide(i % n)
				count.Add(1)
				if int64(d) > worstNS.Load() {
					worstNS.Store(int64(d))
				}
			}
		}()
		src.in <- c
		took = <-src.took
		stop.Store(true)
		wg.Wait()
		return took, time.Duration(worstNS.Load()), count.Load()
	}
	same, sameWorst, sameN := reload(compile(100))
	changed, changedWorst, changedN := reload(compile(200))
	b.ReportMetric(compileTook.Seconds(), "compile-s")
	b.ReportMetric(float64(h1-h0)/float64(n), "config-B/limit")
	b.ReportMetric(float64(h2-h1)/float64(n), "engine-B/limit")
	b.ReportMetric(float64(idle), "metrics-idle-B")
	b.ReportMetric(float64(used), "metrics-1%-B")
	b.ReportMetric(same.Seconds(), "reload-same-s")
	b.ReportMetric(changed.Seconds(), "reload-changed-s")
	b.ReportMetric(max(sameWorst, changedWorst).Seconds()*1000, "worst-decision-ms")
	b.Logf("decisions during the reloads: %d and %d; worst %v and %v", sameN, changedN, sameWorst, changedWorst)
}
