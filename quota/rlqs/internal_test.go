package rlqs

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/sluicetest"
)

const benchRules = `domain: d
quota_buckets:
  - bucket_id: {name: ""}
    requests_per_unit: 100000
    unit: second
    assignment_ttl: 2s
`

func loadRules(tb testing.TB) *config.Config {
	c, err := config.LoadFS(fstest.MapFS{"r.yaml": {Data: []byte(benchRules)}}, "r.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// report builds one report of buckets b0..b(n-1) of one second each.
func reportOf(n int, allowed uint64) *rlqspb.RateLimitQuotaUsageReports {
	m := &rlqspb.RateLimitQuotaUsageReports{Domain: "d"}
	for i := 0; i < n; i++ {
		m.BucketQuotaUsages = append(m.BucketQuotaUsages, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:    &rlqspb.BucketId{Bucket: map[string]string{"name": fmt.Sprint("b", i)}},
			TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: allowed})
	}
	return m
}

// streams returns n streams of svc that are not attached to gRPC (handle only).
func streams(svc *Service, n int) []*stream {
	out := make([]*stream, n)
	for i := range out {
		out[i] = newStream(svc, fmt.Sprint("client-", i))
	}
	return out
}

// TestMemoryBounded: clients that report many buckets and leave are forgotten once their
// shares have expired (a leaver may spend its share until then): the state returns to
// empty.
func TestMemoryBounded(t *testing.T) {
	clock := sluicetest.NewManualClock(time.Unix(1e9, 0))
	rules := loadRules(t)
	svc := New(Config{Rules: func() *config.Config { return rules }, Clock: clock})
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		for _, st := range streams(svc, 20) {
			st.id += fmt.Sprint("-", round)
			if _, err := st.handle(ctx, reportOf(200, 10)); err != nil {
				t.Fatal(err)
			}
			st.leaveAll()
		}
		clock.Advance(time.Second)
	}
	mem := svc.ledger.(*memoryLedger)
	if n := mem.size(); n > 200 {
		t.Fatalf("%d buckets held after every client left, want at most the 200 reported", n)
	}
	clock.Advance(time.Minute) // past every TTL and the sweep interval
	st := streams(svc, 1)[0]
	if _, err := st.handle(ctx, reportOf(1, 1)); err != nil {
		t.Fatal(err)
	}
	if n := mem.size(); n != 1 {
		t.Fatalf("%d buckets after everyone left and expired, want only the new one", n)
	}
}

// BenchmarkReport measures the server's CPU per bucket usage report (validation,
// allocation, strategy): one op is one client's report of one bucket that 10 clients
// share, 100 buckets per report message. 1 s / (ns/op) is the number of clients × buckets
// one core sustains at a 1 s reporting interval.
func BenchmarkReport(b *testing.B) {
	for _, clients := range []int{1, 10, 100} {
		b.Run(fmt.Sprint("clients=", clients), func(b *testing.B) {
			clock := sluicetest.NewManualClock(time.Unix(1e9, 0))
			rules := loadRules(b)
			svc := New(Config{Rules: func() *config.Config { return rules }, Clock: clock})
			sts := streams(svc, clients)
			msg := reportOf(100, 50)
			ctx := context.Background()
			for _, st := range sts { // subscribe
				if _, err := st.handle(ctx, msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i += 100 {
				if i%(100*clients) == 0 {
					clock.Advance(time.Second / 100)
				}
				if _, err := sts[(i/100)%clients].handle(ctx, msg); err != nil {
					b.Fatal(err)
				}
			}
			// CPU time, not wall time: on a shared machine the wall clock also counts the
			// time other processes held the core.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's user + system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestStrategiesAreValid: every strategy the server hands out passes go-control-plane's
// validation of the protocol (Envoy rejects the others), zero shares included.
func TestStrategiesAreValid(t *testing.T) {
	body := `domain: d
quota_buckets:
  - bucket_id: {a: x}
    requests_per_unit: 100
    unit: minute
    burst: 10
  - bucket_id: {a: y}
    requests_per_unit: 100
    unit: minute
    strategy: requests_per_time_unit
  - bucket_id: {a: z}
    strategy: allow_all
`
	c, err := config.LoadFS(fstest.MapFS{"r.yaml": {Data: []byte(body)}}, "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Domain("d").QuotaRules() {
		for _, share := range []int64{0, 1, 5, 100} {
			s := Strategy(r, share)
			if err := s.ValidateAll(); err != nil {
				t.Errorf("%s share %d: %v: %v", r.Name, share, s, err)
			}
			if err := assign(&rlqspb.BucketId{Bucket: map[string]string{"a": "x"}}, s, time.Second).ValidateAll(); err != nil {
				t.Errorf("%s share %d: action: %v", r.Name, share, err)
			}
		}
	}
	if s := Strategy(c.Domain("d").QuotaRules()[0], 0); s.GetBlanketRule().String() != "DENY_ALL" {
		t.Errorf("zero token bucket share: %v, want DENY_ALL", s)
	}
	if tb := Strategy(c.Domain("d").QuotaRules()[0], 5).GetTokenBucket(); tb.GetMaxTokens() != 1 || tb.GetTokensPerFill().GetValue() != 5 {
		t.Errorf("share 5 of 100 with a burst of 10: %v, want 1 token of room, 5 per minute", tb)
	}
}

// TestReloadMovesClassRecord: a reload that adds a criticality_key moves a stream's bucket
// to its new client record (the class entry left out of the bucket key) and the old record
// leaves, so its demand and share no longer count.
func TestReloadMovesClassRecord(t *testing.T) {
	clock := sluicetest.NewManualClock(time.Unix(1e9, 0))
	load := func(extra string) *config.Config {
		c, err := config.LoadFS(fstest.MapFS{"r.yaml": {Data: []byte(benchRules + extra)}}, "r.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	rules := load("")
	svc := New(Config{Rules: func() *config.Config { return rules }, Clock: clock})
	st := streams(svc, 1)[0]
	msg := &rlqspb.RateLimitQuotaUsageReports{Domain: "d", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId:    &rlqspb.BucketId{Bucket: map[string]string{"name": "b", "criticality": "sheddable"}},
		TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 10}}}
	ctx := context.Background()
	if _, err := st.handle(ctx, msg); err != nil {
		t.Fatal(err)
	}
	mem := svc.ledger.(*memoryLedger)
	var old *memBucket
	for _, mb := range mem.buckets {
		old = mb
	}
	rules = load("    criticality_key: criticality\n")
	clock.Advance(time.Second)
	if _, err := st.handle(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if c := old.b.Clients[st.id]; c == nil || !c.Left {
		t.Fatalf("old record %+v, want it left (its share counted until it expires)", c)
	}
	clock.Advance(time.Minute) // past the old share's expiry and the sweep interval
	if _, err := st.handle(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if n := mem.size(); n != 1 {
		t.Fatalf("%d buckets, want only the new one (the old record left, its share expired)", n)
	}
	for _, mb := range mem.buckets {
		if mb != old {
			c := mb.b.Clients[st.id+"\x00sheddable"]
			if c == nil || c.Class != sluice.Sheddable {
				t.Fatalf("new bucket's clients %v, want the stream's sheddable record", mb.b.Clients)
			}
		}
	}
}
