package rlqs_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/quota/alloc"
	"github.com/sluicehq/sluice/quota/rlqs"
)

const interval = time.Second

const fairRules = `domain: envoy
quota_buckets:
  - bucket_id: {name: api}
    requests_per_unit: 1000
    unit: second
    assignment_ttl: 1s
    abandon_after: 3s
  - bucket_id: {name: static}
    requests_per_unit: 100
    unit: second
    fairness: static
    static_share: 30
  - bucket_id: {name: open}
    strategy: allow_all
`

var api = map[string]string{"name": "api"}

// skewed are per-second demands of 10 clients: a few heavy, many light (sum 2605 > 1000).
var skewed = []float64{10, 20, 40, 80, 160, 320, 640, 1280, 50, 5}

type fleet struct {
	t       *testing.T
	clients []*fakeEnvoy
	demands []float64
	shares  []int64
	ttls    []time.Duration
}

// round makes every client still in the fleet report one interval of its demand (allowed
// up to its share, the rest denied) and records the answers.
func (f *fleet) round() {
	f.t.Helper()
	for i, c := range f.clients {
		if c == nil {
			continue
		}
		d := uint64(f.demands[i])
		allowed := min(d, uint64(max(f.shares[i], 0)))
		r := c.report(usage(api, interval, allowed, d-allowed))
		if len(r.BucketAction) != 1 {
			f.t.Fatalf("client %d: %d actions", i, len(r.BucketAction))
		}
	}
	for i, c := range f.clients { // answers and pushes
		if c != nil {
			f.shares[i], f.ttls[i] = c.latest(api)
		}
	}
}

// newFleetOver opens one fake Envoy per skewed demand, client i on conns[i % len(conns)].
func newFleetOver(t *testing.T, conns ...*grpc.ClientConn) *fleet {
	f := &fleet{t: t, demands: skewed, shares: make([]int64, len(skewed)), ttls: make([]time.Duration, len(skewed))}
	for i := range skewed {
		f.clients = append(f.clients, newFakeEnvoy(t, conns[i%len(conns)], "envoy"))
	}
	return f
}

// twoRounds runs two reporting rounds an interval apart and checks the shares are within
// 5% of the max-min fair split and within the limit.
func (f *fleet) twoRounds(clock interface{ Advance(time.Duration) }) {
	f.t.Helper()
	want := maxMin(1000, f.demands)
	f.round()
	clock.Advance(interval)
	f.round()
	if !within5(f.shares, want) {
		f.t.Fatalf("after two rounds: shares %v, max-min fair %v", f.shares, want)
	}
	var sum int64
	for _, s := range f.shares {
		sum += s
	}
	if sum > 1000 {
		f.t.Fatalf("shares sum to %d > 1000", sum)
	}
}

func maxMin(limit int64, demands []float64) []int64 {
	out := make([]int64, len(demands))
	alloc.MaxMinFair(limit, demands, out)
	return out
}

// within5 reports whether every share is within 5% (or 1 request) of want.
func within5(got, want []int64) bool {
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > math.Max(1, 0.05*float64(want[i])) {
			return false
		}
	}
	return true
}

func TestMaxMinFairSharesAfterTwoRounds(t *testing.T) {
	clock := newClock()
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, fairRules) }, Clock: clock})
	f := newFleetOver(t, serve(t, svc))
	f.twoRounds(clock)
	for _, ttl := range f.ttls {
		if ttl != time.Second {
			t.Errorf("ttl %v", ttl)
		}
	}

	// The heaviest client leaves: its share goes to the others within one interval plus
	// the TTL.
	f.clients[7].close()
	waitFor(t, "the server to see the stream close", func() bool { return svc.Streams() == 9 })
	f.clients[7] = nil
	rest := append(append([]float64{}, skewed[:7]...), skewed[8:]...)
	want2 := maxMin(1000, rest)
	for elapsed := time.Duration(0); elapsed < interval+time.Second; elapsed += interval {
		clock.Advance(interval)
		f.round()
	}
	got := append(append([]int64{}, f.shares[:7]...), f.shares[8:]...)
	if !within5(got, want2) {
		t.Fatalf("after a leave: shares %v, max-min fair %v", got, want2)
	}
}

// TestNewClientNeverOvercommits: a newcomer arrives while three clients hold the whole
// limit: once the pushes are delivered, the shares the clients hold (the current assignment
// of each) never exceed the limit, and the newcomer gets its fair share at its first report
// and everyone theirs within two.
func TestNewClientNeverOvercommits(t *testing.T) {
	clock := newClock()
	body := strings.Replace(fairRules, "assignment_ttl: 1s", "assignment_ttl: 2s", 1)
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, body) }, Clock: clock})
	conn := serve(t, svc)
	holds := newHoldings(t, clock, 1000)
	clients := []*fakeEnvoy{newFakeEnvoy(t, conn, "envoy"), newFakeEnvoy(t, conn, "envoy"), newFakeEnvoy(t, conn, "envoy")}
	last := map[int]int64{}
	round := func() {
		for _, c := range clients {
			c.report(usage(api, interval, 800, 0))
			for i, c := range clients {
				last[i] = holds.add(fmt.Sprint(i), c, api)
			}
			holds.check()
		}
	}
	for i := 0; i < 3; i++ {
		round()
		clock.Advance(interval)
	}
	clients = append(clients, newFakeEnvoy(t, conn, "envoy"))
	clients[3].report(usage(api, 0, 0, 0))
	if s, _ := clients[3].latest(api); s < 240 {
		t.Fatalf("newcomer's first share %d, want its fair share", s)
	}
	for i := 0; i < 2; i++ {
		round()
		clock.Advance(interval / 2)
		holds.check()
		clock.Advance(interval / 2)
	}
	for i := 0; i < 4; i++ {
		if last[i] < 240 || last[i] > 260 {
			t.Fatalf("after joining: shares %v, want 250 each", last)
		}
	}
}

func TestStrategies(t *testing.T) {
	clock := newClock()
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, fairRules) }, Clock: clock})
	conn := serve(t, svc)
	a, b := newFakeEnvoy(t, conn, "envoy"), newFakeEnvoy(t, conn, "envoy")
	static := map[string]string{"name": "static"}
	open := map[string]string{"name": "open", "x": "y"}
	r := a.report(usage(static, interval, 500, 0), usage(open, 0, 0, 0), usage(map[string]string{"name": "none"}, 0, 1, 0))
	if len(r.BucketAction) != 2 {
		t.Fatalf("actions %v (an unmatched bucket gets none)", r.BucketAction)
	}
	if s, _ := share(r.BucketAction[0]); s != 30 {
		t.Errorf("static share %d, want 30", s)
	}
	if q := r.BucketAction[1].GetQuotaAssignmentAction(); q.GetRateLimitStrategy().GetBlanketRule().String() != "ALLOW_ALL" {
		t.Errorf("open bucket: %v", r.BucketAction[1])
	}
	if s, _ := share(b.report(usage(static, interval, 10, 0)).BucketAction[0]); s != 30 {
		t.Errorf("second static share %d", s)
	}
	// Same strategy again: the same message, so the client extends its TTL.
	r1 := a.report(usage(static, interval, 10, 0))
	r2 := a.report(usage(static, interval, 10, 0))
	if r1.BucketAction[0].String() != r2.BucketAction[0].String() {
		t.Errorf("resent strategy differs: %v vs %v", r1, r2)
	}
}

func TestAbandonIdleBucket(t *testing.T) {
	clock := newClock()
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, fairRules) }, Clock: clock})
	c := newFakeEnvoy(t, serve(t, svc), "envoy")
	c.report(usage(api, interval, 10, 0))
	for i := 0; i < 3; i++ {
		clock.Advance(interval)
		if s, _ := share(c.report(usage(api, interval, 0, 0)).BucketAction[0]); s < 0 {
			t.Fatalf("abandoned after %d idle reports", i+1)
		}
	}
	clock.Advance(interval)
	r := c.report(usage(api, interval, 0, 0))
	if r.BucketAction[0].GetAbandonAction() == nil {
		t.Fatalf("idle past abandon_after: %v, want an abandon", r)
	}
}

func TestDrainExpiresAssignments(t *testing.T) {
	clock := newClock()
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, fairRules) }, Clock: clock})
	c := newFakeEnvoy(t, serve(t, svc), "envoy")
	c.report(usage(api, interval, 10, 0))
	svc.Drain()
	r := c.recv()
	if s, ttl := share(r.BucketAction[0]); s <= 0 || ttl != 0 {
		t.Fatalf("drain sent %v, want the assignment with TTL 0", r)
	}
	if err := c.ended(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream ended with %v, want Unavailable", err)
	}
}

// TestBadInputPerStream: each malformed or out-of-order stream is ended with a status
// naming the problem, while a well-behaved stream keeps its answers.
func TestBadInputPerStream(t *testing.T) {
	clock := newClock()
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules(t, fairRules) }, Clock: clock, MaxBuckets: 50})
	conn := serve(t, svc)
	good := newFakeEnvoy(t, conn, "envoy")
	good.report(usage(api, interval, 10, 0))
	huge := map[string]string{}
	for i := 0; i < 100; i++ {
		huge[fmt.Sprint("k", i)] = "v"
	}
	many := func(n, from int) []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
		var us []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage
		for i := 0; i < n; i++ {
			us = append(us, usage(map[string]string{"name": fmt.Sprint("b", from+i)}, 0, 0, 0))
		}
		return us
	}
	for _, tc := range []struct {
		name string
		code codes.Code
		msg  string
		send func(f *fakeEnvoy)
	}{
		{"no domain", codes.InvalidArgument, "first report of a stream must name the domain", func(f *fakeEnvoy) {
			f.sent = true
			f.send(usage(api, interval, 1, 0))
		}},
		{"domain changed", codes.InvalidArgument, `domain: "other" on a stream of domain "envoy"`, func(f *fakeEnvoy) {
			f.report(usage(api, interval, 1, 0))
			_ = f.stream.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "other", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(api, interval, 1, 0)}})
		}},
		{"bucket twice", codes.InvalidArgument, "reported twice in one report", func(f *fakeEnvoy) {
			f.send(usage(api, interval, 1, 0), usage(api, interval, 1, 0))
		}},
		{"empty bucket id", codes.InvalidArgument, "bucket_quota_usages[0].bucket_id: empty", func(f *fakeEnvoy) {
			f.send(usage(nil, interval, 1, 0))
		}},
		{"thousands of entries", codes.InvalidArgument, "100 entries, more than the maximum of 16", func(f *fakeEnvoy) {
			f.send(usage(huge, interval, 1, 0))
		}},
		{"huge value", codes.InvalidArgument, "more than the maximum of 1024 bytes", func(f *fakeEnvoy) {
			f.send(usage(map[string]string{"name": strings.Repeat("x", 5000)}, interval, 1, 0))
		}},
		{"negative elapsed", codes.InvalidArgument, "time_elapsed: negative", func(f *fakeEnvoy) {
			f.send(usage(api, -time.Second, 1, 0))
		}},
		{"absurd counts", codes.InvalidArgument, "absurd counts", func(f *fakeEnvoy) {
			f.send(usage(api, time.Millisecond, math.MaxUint64/2, 0))
		}},
		{"too many buckets at once", codes.ResourceExhausted, "51 buckets in one report, more than the maximum of 50", func(f *fakeEnvoy) {
			f.send(many(51, 0)...)
		}},
		{"too many buckets over time", codes.ResourceExhausted, "would subscribe to 60 buckets", func(f *fakeEnvoy) {
			f.send(many(40, 0)...)
			f.send(many(20, 40)...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEnvoy(t, conn, "envoy")
			tc.send(f)
			var err error
			for err == nil {
				select {
				case err = <-f.done:
				case <-f.resps:
				case <-time.After(10 * time.Second):
					t.Fatal("stream not ended")
				}
			}
			st := status.Convert(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
				t.Fatalf("ended with %v %q, want %v containing %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
			clock.Advance(interval)
			if s, _ := share(good.report(usage(api, interval, 10, 0)).BucketAction[0]); s <= 0 {
				t.Fatalf("the good stream got share %d", s)
			}
		})
	}
}
