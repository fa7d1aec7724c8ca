package server_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/sluicetest"
)

const quotaMetricsRules = `domain: q
quota_buckets:
  - name: api-per-tenant
    bucket_id: {name: api, tenant: ""}
    requests_per_unit: 100
    unit: second
    assignment_ttl: 1m
    abandon_after: 10s
  - name: open
    bucket_id: {name: open}
    strategy: allow_all
`

// rlqsStream is one RLQS stream on a server: an Envoy's, built from the go-control-plane
// types.
type rlqsStream struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
}

func openRLQS(t *testing.T, h *harness) *rlqsStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := rlqspb.NewRateLimitQuotaServiceClient(h.conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &rlqsStream{t: t, stream: st}
}

func bucketUsage(tenant string, elapsed time.Duration, allowed, denied uint64) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
	id := map[string]string{"name": "api", "tenant": tenant}
	if tenant == "" {
		id = map[string]string{"name": "open"}
	}
	return &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqspb.BucketId{Bucket: id},
		TimeElapsed: durationpb.New(elapsed), NumRequestsAllowed: allowed, NumRequestsDenied: denied}
}

// send sends one report message.
func (s *rlqsStream) send(domain string, us ...*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage) {
	s.t.Helper()
	if err := s.stream.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: us}); err != nil {
		s.t.Fatal(err)
	}
}

// report sends one report message and returns the answer.
func (s *rlqsStream) report(domain string, us ...*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage) *rlqspb.RateLimitQuotaResponse {
	s.t.Helper()
	s.send(domain, us...)
	r, err := s.stream.Recv()
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// value returns the value of the series named exactly series (name and labels as the
// metrics page prints them), or NaN when the page lacks it.
func (h *harness) value(t *testing.T, series string) float64 {
	t.Helper()
	line := h.metric(t, series+" ")
	if line == "" {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(line[len(series)+1:], 64)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return v
}

// waitValue polls the metrics page until series has the value want (counters incremented
// after a message is delivered may lag its receipt).
func (h *harness) waitValue(t *testing.T, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := h.value(t, series)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", series, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestQuotaMetrics drives RLQS streams through a server and reads each RLQS series off its
// /metrics page as the streams open, report, get assignments, abandons and expiries, send
// bad input, and close.
func TestQuotaMetrics(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	h := start(t, quotaMetricsRules, func(c *server.Config) { c.Quota.Clock = clock })
	const rule = `{domain="q",rule="api-per-tenant"}`
	for series, want := range map[string]float64{
		`sluice_rlqs_streams`:                                                   0,
		`sluice_rlqs_limit_rate` + rule:                                         100,
		`sluice_rlqs_buckets` + rule:                                            0,
		`sluice_rlqs_assigned_rate` + rule:                                      0,
		`sluice_rlqs_demand_rate` + rule:                                        0,
		`sluice_rlqs_buckets{domain="q",rule="open"}`:                           0,
		`sluice_rlqs_actions_total{kind="assignment"}`:                          0,
		`sluice_rlqs_rejected_total{code="InvalidArgument",reason="domain"}`:    0,
		`sluice_rlqs_rejected_total{code="ResourceExhausted",reason="buckets"}`: 0,
		`sluice_rlqs_rejected_total{code="Unavailable",reason="shutdown"}`:      0,
		`sluice_rlqs_state_errors_total`:                                        0,
		`sluice_rlqs_state_retries_total`:                                       0,
		`sluice_rlqs_report_duration_seconds_count`:                             0,
	} {
		if got := h.value(t, series); got != want {
			t.Errorf("before any stream: %s = %v, want %v", series, got, want)
		}
	}
	if got := h.value(t, `sluice_rlqs_limit_rate{domain="q",rule="open"}`); !math.IsNaN(got) {
		t.Errorf("an allow_all rule has a limit of %v", got)
	}

	// Two tenants on one stream, 500 and 30 requests per second: each tenant is its own
	// bucket of 100 per second.
	a := openRLQS(t, h)
	r := a.report("q", bucketUsage("acme", time.Second, 400, 100), bucketUsage("zeta", time.Second, 30, 0), bucketUsage("", time.Second, 7, 0))
	if len(r.BucketAction) != 3 {
		t.Fatalf("answer %v, want three assignments", r)
	}
	h.waitValue(t, `sluice_rlqs_actions_total{kind="assignment"}`, 3)
	for series, want := range map[string]float64{
		`sluice_rlqs_streams`:                               1,
		`sluice_rlqs_reports_total{domain="q"}`:             1,
		`sluice_rlqs_bucket_reports_total{domain="q"}`:      3,
		`sluice_rlqs_report_duration_seconds_count`:         1,
		`sluice_rlqs_buckets` + rule:                        2,
		`sluice_rlqs_assigned_rate` + rule:                  200, // a newcomer gets the whole limit of its bucket
		`sluice_rlqs_demand_rate` + rule:                    530,
		`sluice_rlqs_buckets{domain="q",rule="open"}`:       1,
		`sluice_rlqs_assigned_rate{domain="q",rule="open"}`: 0,
		`sluice_rlqs_demand_rate{domain="q",rule="open"}`:   7,
	} {
		if got := h.value(t, series); got != want {
			t.Errorf("after one report: %s = %v, want %v", series, got, want)
		}
	}

	// A second stream on tenant acme: one more client, no more buckets; it gets its share at
	// once and the first is pushed its shrunk one: together they still hold the limit.
	b := openRLQS(t, h)
	b.report("q", bucketUsage("acme", time.Second, 50, 0))
	h.waitValue(t, `sluice_rlqs_actions_total{kind="assignment"}`, 4)
	// The first stream's shrunk share is pushed at this instant of the clock (its TTL runs
	// from here): wait for it before the clock moves, or a push sent late would expire late.
	for deadline := time.Now().Add(10 * time.Second); h.value(t, `sluice_rlqs_actions_total{kind="push"}`) < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first stream's shrunk share was never pushed")
		}
	}
	for series, want := range map[string]float64{
		`sluice_rlqs_streams`:              2,
		`sluice_rlqs_buckets` + rule:       2,
		`sluice_rlqs_assigned_rate` + rule: 200,
		`sluice_rlqs_demand_rate` + rule:   580,
	} {
		if got := h.value(t, series); got != want {
			t.Errorf("after a second stream: %s = %v, want %v", series, got, want)
		}
	}

	// A domain the rules do not define is counted under domain "": its streams cannot add
	// series.
	u := openRLQS(t, h)
	u.send("nowhere", bucketUsage("acme", time.Second, 1, 0))
	h.waitValue(t, `sluice_rlqs_reports_total{domain=""}`, 1)

	// Idle past abandon_after: abandoned, and no longer counted.
	b.report("", bucketUsage("acme", time.Second, 0, 0))
	clock.Advance(11 * time.Second)
	if r := b.report("", bucketUsage("acme", time.Second, 0, 0)); r.BucketAction[0].GetAbandonAction() == nil {
		t.Fatalf("idle bucket: %v, want an abandon", r)
	}
	h.waitValue(t, `sluice_rlqs_actions_total{kind="abandon"}`, 1)
	if got := h.value(t, `sluice_rlqs_demand_rate`+rule); got != 530 {
		t.Errorf("after the abandon: demand %v, want 530", got)
	}
	// ... and the first stream's assignments, handed out 11 s ago, still run (TTL 1m): its
	// acme share as pushed when the second stream joined (75, the second holding 25), until
	// its next report.
	if got := h.value(t, `sluice_rlqs_assigned_rate`+rule); got != 175 {
		t.Errorf("after 11 s: assigned %v, want 175", got)
	}
	if got := h.value(t, `sluice_rlqs_actions_total{kind="push"}`); got < 1 {
		t.Errorf("pushes %v, want the first stream's shrunk acme share pushed", got)
	}
	clock.Advance(time.Minute)
	if got := h.value(t, `sluice_rlqs_assigned_rate`+rule); got != 0 {
		t.Errorf("past the TTL: assigned %v, want 0", got)
	}

	// Bad input: each stream ends with its code, counted under its reason; the other
	// streams are unaffected.
	for _, tc := range []struct {
		reason, code string
		send         func(s *rlqsStream)
	}{
		{"domain", "InvalidArgument", func(s *rlqsStream) { s.send("", bucketUsage("acme", time.Second, 1, 0)) }},
		{"bucket_id", "InvalidArgument", func(s *rlqsStream) {
			s.send("q", bucketUsage("acme", time.Second, 1, 0), bucketUsage("acme", time.Second, 1, 0))
		}},
		{"time_elapsed", "InvalidArgument", func(s *rlqsStream) { s.send("q", bucketUsage("acme", -time.Second, 1, 0)) }},
		{"counts", "InvalidArgument", func(s *rlqsStream) { s.send("q", bucketUsage("acme", time.Millisecond, math.MaxUint64/2, 0)) }},
		{"buckets", "ResourceExhausted", func(s *rlqsStream) {
			var us []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage
			for i := 0; i <= rlqs.DefaultMaxBuckets; i++ {
				us = append(us, bucketUsage(strconv.Itoa(i), time.Second, 1, 0))
			}
			s.send("q", us...)
		}},
	} {
		s := openRLQS(t, h)
		tc.send(s)
		var err error
		for err == nil {
			_, err = s.stream.Recv()
		}
		if got := status.Code(err).String(); got != tc.code {
			t.Errorf("%s: stream ended with %v, want %s", tc.reason, err, tc.code)
		}
		h.waitValue(t, `sluice_rlqs_rejected_total{code="`+tc.code+`",reason="`+tc.reason+`"}`, 1)
	}
	if got := h.value(t, `sluice_rlqs_rejected_total{code="ResourceExhausted",reason="streams"}`); got != 0 {
		t.Errorf("streams rejections %v, want 0", got)
	}

	// A planned stop expires the assignments of the streams left (a: 3 buckets) and
	// refuses new streams.
	h.srv.Quota().Drain()
	h.waitValue(t, `sluice_rlqs_actions_total{kind="expire"}`, 3)
	late := openRLQS(t, h)
	_ = late.stream.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "q"}) // refused: may fail already
	if _, err := late.stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream during the drain: %v, want Unavailable", err)
	}
	h.waitValue(t, `sluice_rlqs_rejected_total{code="Unavailable",reason="shutdown"}`, 1)
	h.waitValue(t, `sluice_rlqs_streams`, 0)
	if got := h.value(t, `sluice_rlqs_report_duration_seconds_count`); got != 5 {
		t.Errorf("report durations observed %v, want one per report answered", got)
	}
}

// TestQuotaMetricsStateErrors: with the quota state's Redis unreachable, reports get no
// answer and each failed state call is counted.
func TestQuotaMetricsStateErrors(t *testing.T) {
	rc := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rc.Close() })
	h := start(t, quotaMetricsRules, func(c *server.Config) { c.Quota.Ledger = rlqs.NewRedisLedger(rc, "") })
	s := openRLQS(t, h)
	s.send("q", bucketUsage("acme", time.Second, 1, 0), bucketUsage("zeta", time.Second, 1, 0))
	h.waitValue(t, `sluice_rlqs_state_errors_total`, 2)
	h.waitValue(t, `sluice_rlqs_reports_total{domain="q"}`, 1)
	if got := h.value(t, `sluice_rlqs_actions_total{kind="assignment"}`); got != 0 {
		t.Errorf("%v assignments sent with the state down", got)
	}
	if !strings.Contains(h.metrics(t), "sluice_rlqs_streams 1") {
		t.Error("the stream did not stay open")
	}
}
