package rls_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// harness is an engine over a memory store on a manual clock, its store calls counted, and
// its metrics those of package rlsmetrics (metric): the engine as package server serves it,
// without the transport.
type harness struct {
	e     *rls.Engine
	store *sluicetest.CountingStore
	clock *sluicetest.ManualClock
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// start builds an engine of rules (YAML text; none when "", then a mutate sets them) over
// a memory store on a manual clock at t0.
func start(t *testing.T, rules string, mutate ...func(*rls.Config)) *harness {
	t.Helper()
	clock := sluicetest.NewManualClock(t0)
	mem, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	h := &harness{store: &sluicetest.CountingStore{Store: mem}, clock: clock}
	cfg := rls.Config{Store: h.store, ReloadInterval: -1}
	if rules != "" {
		cfg.Rules = testenv.Rules(t, rules)
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h.e = observed(t, cfg)
	return h
}

// ask decides a request of descs in domain.
func (h *harness) ask(t *testing.T, domain string, descs ...rls.Descriptor) *rls.Answer {
	t.Helper()
	return h.decide(t, &rls.Request{Domain: domain, Descriptors: descs})
}

func (h *harness) decide(t *testing.T, req *rls.Request) *rls.Answer {
	t.Helper()
	ans := &rls.Answer{}
	if err := h.e.Decide(context.Background(), req, ans); err != nil {
		t.Fatal(err)
	}
	return ans
}

// metric returns the line of the engine's metrics page that starts with prefix, or "".
func (h *harness) metric(t *testing.T, prefix string) string { return metric(t, h.e, prefix) }

// metricValue returns the value of the metric line that starts with prefix (-1 if absent).
func (h *harness) metricValue(t *testing.T, prefix string) float64 {
	line := h.metric(t, prefix)
	if line == "" {
		return -1
	}
	v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// summary renders an answer as package server's tests render an RLS response: the overall
// code, then per descriptor "CODE remaining/limit per unit[xN] reset" (the current limit of
// limited descriptors, rls.Verdict.Current).
func summary(ans *rls.Answer) string {
	var parts []string
	for i := range ans.Verdicts {
		v := &ans.Verdicts[i]
		s := v.Code.String()
		if v.Limited {
			cl := v.Current()
			unit := strings.ToLower(cl.Unit.String())
			if cl.UnitMultiplier > 0 {
				unit = fmt.Sprintf("%dx%s", cl.UnitMultiplier, unit)
			}
			name := ""
			if cl.Name != "" {
				name = " " + cl.Name
			}
			s += fmt.Sprintf(" %d/%d per %s%s reset %v", v.Remaining, cl.RequestsPerUnit, unit, name, v.Reset.Truncate(time.Second))
		}
		parts = append(parts, s)
	}
	return ans.Code.String() + ": " + strings.Join(parts, "; ")
}

type step struct {
	advance time.Duration
	req     *rls.Request
	want    string
}

func runSteps(t *testing.T, h *harness, steps []step) {
	t.Helper()
	for i, s := range steps {
		h.clock.Advance(s.advance)
		if got := summary(h.decide(t, s.req)); got != s.want {
			t.Errorf("step %d:\n got  %s\n want %s", i, got, s.want)
		}
	}
}
