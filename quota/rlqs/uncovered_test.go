package rlqs_test

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/quota/rlqs"
)

// uncoveredObserver counts Uncovered by domain (a hand-written Observer).
type uncoveredObserver struct {
	mu     sync.Mutex
	counts map[string]int
	seen   atomic.Int64
}

func (o *uncoveredObserver) Reported(string, int, time.Duration) {}
func (o *uncoveredObserver) Rejected(rlqs.Reason)                {}
func (o *uncoveredObserver) Sent(rlqs.ActionKind, int)           {}
func (o *uncoveredObserver) StateError()                         {}
func (o *uncoveredObserver) StateRetry()                         {}

func (o *uncoveredObserver) Uncovered(domain string) {
	o.mu.Lock()
	o.counts[domain]++
	o.mu.Unlock()
	o.seen.Add(1)
}

func (o *uncoveredObserver) count(domain string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[domain]
}

// TestUncoveredBucketIsTold: a bucket no quota rule covers gets no action, as before, but is
// counted for the Observer (by domain, "" for a domain the rules do not define) and logged,
// at most once a second, with the bucket id's keys and never its values.
func TestUncoveredBucketIsTold(t *testing.T) {
	var logs testenv.LogBuffer
	obs := &uncoveredObserver{counts: map[string]int{}}
	clock := newClock()
	c := rules(t, "domain: go\nquota_buckets:\n  - {bucket_id: {name: api}, requests_per_unit: 10, unit: second}\n")
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return c }, Clock: clock, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	conn := serve(t, svc)

	envoy := newFakeEnvoy(t, conn, "go")
	resp := envoy.report(usage(map[string]string{"name": "api"}, time.Second, 1, 0),
		usage(map[string]string{"name": "tenant-secret-42"}, time.Second, 1, 0))
	if n := len(resp.GetBucketAction()); n != 1 {
		t.Fatalf("%d actions, want 1 (the covered bucket)", n)
	}
	if got := obs.count("go"); got != 1 {
		t.Errorf("uncovered in domain go: %d, want 1", got)
	}
	line := logs.String()
	if !strings.Contains(line, "no quota rule covers") || !strings.Contains(line, "domain=go") || !strings.Contains(line, "bucket_keys=[name]") {
		t.Errorf("log: %q", line)
	}
	if strings.Contains(line, "tenant-secret-42") {
		t.Errorf("the bucket id's value reached the log: %q", line)
	}

	// A domain the rules do not define: counted under "", its name not logged.
	other := newFakeEnvoy(t, conn, "undefined-domain-7")
	other.send(usage(map[string]string{"name": "api"}, time.Second, 1, 0))
	waitFor(t, "the undefined domain's usage counted", func() bool { return obs.seen.Load() == 2 })
	if got := obs.count(""); got != 1 {
		t.Errorf("uncovered in an undefined domain: %d, want 1", got)
	}
	if strings.Count(logs.String(), "no quota rule covers") != 1 {
		t.Errorf("a second line within the second: %q", logs.String())
	}
	clock.Advance(2 * time.Second)
	envoy.report(usage(map[string]string{"name": "api"}, time.Second, 1, 0), usage(map[string]string{"name": "tenant-secret-42"}, time.Second, 1, 0))
	if all := logs.String(); strings.Count(all, "no quota rule covers") != 2 || strings.Contains(all, "undefined-domain-7") || !strings.Contains(all, "suppressed=1") {
		t.Errorf("logs: %q", all)
	}
}

// TestZeroConfigServes: a Service of the zero Config (no rules) answers reports instead of
// panicking: every bucket is uncovered, and counted.
func TestZeroConfigServes(t *testing.T) {
	obs := &uncoveredObserver{counts: map[string]int{}}
	envoy := newFakeEnvoy(t, serve(t, rlqs.New(rlqs.Config{Observer: obs})), "go")
	envoy.send(usage(map[string]string{"name": "api"}, time.Second, 1, 0))
	envoy.send(usage(map[string]string{"name": "api"}, time.Second, 1, 0))
	waitFor(t, "two uncovered usages", func() bool { return obs.seen.Load() == 2 })
	if got := obs.count(""); got != 2 {
		t.Errorf("uncovered in an undefined domain: %d, want 2", got)
	}
}
