package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/quota/alloc"
)

// The RLQS fleet suite (issues 22, 37): fake Envoys over real RLQS gRPC streams against
// sluice serve children, one server alone and two replicas on one Redis, reporting every
// 200 ms, with a 1 s and a 30 s assignment TTL, through joins, a demand change, a leave (the
// Envoy stops), a stream that breaks while its Envoy keeps spending, and a join while shares
// are still held, with an abusive client opening streams meanwhile. Never over: the shares
// the Envoys hold, as each received them, never sum above the limit for longer than the
// delivery skew between two streams.

const (
	rlqsLimit    = 1000 // requests per second, the fleet's
	rlqsInterval = 200 * time.Millisecond
	// rlqsSlack is what a loaded 2-core machine may add to a bound of report intervals.
	rlqsSlack = 300 * time.Millisecond
	// rlqsSkew is the longest excursion asserted: a shrink and the grow it frees travel on
	// two streams; the server sends the grow only once the shrink is sent (the ledger is
	// told the delivery), so the two can only cross on the way, in the kernel and in the
	// Envoys' receiving goroutines, which a loaded machine may delay by some milliseconds.
	// The excursions are measured from the instants the fake Envoys received their
	// assignments (and the expiries they count from them), which is what the test controls.
	rlqsSkew = 50 * time.Millisecond
)

func TestRLQSFleet(t *testing.T) {
	testenv.Timing(t)
	bin := fleetBinary(t) // without the race detector: the bounds are real time
	for _, ttl := range []time.Duration{time.Second, 30 * time.Second} {
		for _, replicas := range []int{1, 2} {
			t.Run(fmt.Sprintf("ttl=%v/replicas=%d", ttl, replicas), func(t *testing.T) {
				var args []string
				if replicas > 1 {
					args = []string{"--quota-store", "redis://" + testenv.StartRedis(t).Addr() + "/0"}
				}
				runRLQSFleet(t, bin, ttl, replicas, args)
			})
		}
	}
}

// rlqsEnvoy is a fake Envoy: one stream, one bucket, a report every rlqsInterval of its
// demand (allowed up to its share), and the timeline of the shares it was handed, each
// lasting its TTL from its receipt as Envoy counts it.
type rlqsEnvoy struct {
	name   string
	stream grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
	cancel context.CancelFunc
	stop   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	demand   float64 // requests per second
	share    int64   // current, -1 before the first assignment
	timeline []rlqsShare
	denyAll  []time.Duration // when a zero share was received
	start    time.Time
}

type rlqsShare struct {
	at, expires time.Duration // since the run's start
	share       int64
}

func startRLQSEnvoy(t *testing.T, conn *grpc.ClientConn, name string, demand float64, start time.Time) *rlqsEnvoy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &rlqsEnvoy{name: name, stream: st, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{}), demand: demand, share: -1, start: start}
	t.Cleanup(e.leave)
	go func() {
		for {
			resp, err := st.Recv()
			if err != nil {
				return
			}
			now := time.Since(start)
			for _, a := range resp.GetBucketAction() {
				q := a.GetQuotaAssignmentAction()
				if q == nil {
					continue
				}
				s := int64(q.GetRateLimitStrategy().GetTokenBucket().GetTokensPerFill().GetValue())
				e.mu.Lock()
				if q.GetRateLimitStrategy().GetBlanketRule().String() == "DENY_ALL" {
					e.denyAll = append(e.denyAll, now)
				}
				e.share = s
				e.timeline = append(e.timeline, rlqsShare{now, now + q.GetAssignmentTimeToLive().AsDuration(), s})
				e.mu.Unlock()
			}
		}
	}()
	go func() {
		defer close(e.done)
		tick := time.NewTicker(rlqsInterval)
		defer tick.Stop()
		first := true
		last := time.Now()
		var carry float64 // the fractions of requests not yet reported
		for {
			e.mu.Lock()
			d, share := e.demand, e.share
			e.mu.Unlock()
			now := time.Now()
			el := now.Sub(last)
			if first {
				el = 0
			}
			last = now
			want := math.Floor(d*el.Seconds() + carry)
			carry += d*el.Seconds() - want
			allowed := math.Floor(math.Min(want, math.Max(float64(share), 0)*el.Seconds()))
			m := &rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
				BucketId:    &rlqspb.BucketId{Bucket: map[string]string{"name": "api"}},
				TimeElapsed: durationpb.New(el), NumRequestsAllowed: uint64(allowed), NumRequestsDenied: uint64(want - allowed)}}}
			if first {
				m.Domain = "fleet"
				first = false
			}
			if st.Send(m) != nil {
				return
			}
			select {
			case <-e.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return e
}

// end stops reporting and closes the stream.
func (e *rlqsEnvoy) end() bool {
	select {
	case <-e.stop:
		return false
	default:
	}
	close(e.stop)
	<-e.done
	_ = e.stream.CloseSend()
	e.cancel()
	return true
}

// leave closes the stream of an Envoy that stops: it spends nothing from then on.
func (e *rlqsEnvoy) leave() {
	if !e.end() {
		return
	}
	e.mu.Lock()
	now := time.Since(e.start)
	e.timeline = append(e.timeline, rlqsShare{now, now, 0})
	e.mu.Unlock()
}

// breakStream closes the stream of an Envoy that lives on: it keeps spending its last
// share until that expires.
func (e *rlqsEnvoy) breakStream() { e.end() }

func (e *rlqsEnvoy) set(f func(e *rlqsEnvoy)) {
	e.mu.Lock()
	f(e)
	e.mu.Unlock()
}

// shareAt returns the share e held at instant at: -1 before its first, 0 once expired.
func (e *rlqsEnvoy) shareAt(at time.Duration) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := int64(-1)
	for _, x := range e.timeline {
		if x.at > at {
			break
		}
		s = x.share
		if x.expires <= at {
			s = 0
		}
	}
	return s
}

// expiry returns when the last assignment e received expires: until then the server counts
// it, whether e lives on or stopped.
func (e *rlqsEnvoy) expiry() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.timeline) - 1; i >= 0; i-- {
		if x := e.timeline[i]; x.expires > x.at { // not the mark of a stop
			return x.expires
		}
	}
	return 0
}

// instants returns the instants at which e's share may change: receipts and expiries.
func (e *rlqsEnvoy) instants() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []time.Duration
	for _, x := range e.timeline {
		out = append(out, x.at, x.expires)
	}
	return out
}

// firstNonZeroAfter returns when e first held a positive share after from.
func (e *rlqsEnvoy) firstNonZeroAfter(from time.Duration) (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, x := range e.timeline {
		if x.at >= from && x.share > 0 {
			return x.at, true
		}
	}
	return 0, false
}

// settledAt returns the first instant after from from which every envoy's share stays
// within 5% (or 5 requests) of want until until, and false if none.
func settledAt(envoys []*rlqsEnvoy, want []int64, from, until time.Duration) (time.Duration, bool) {
	for at := until; at >= from; at -= 10 * time.Millisecond {
		for i, e := range envoys {
			if d := math.Abs(float64(e.shareAt(at) - want[i])); d > math.Max(5, 0.05*float64(want[i])) {
				if at == until {
					return 0, false
				}
				return at + 10*time.Millisecond, true
			}
		}
	}
	return from, true
}

// excursion is a span of time during which the shares held summed above the limit.
type excursion struct {
	at, length time.Duration
	peak       int64 // the most above the limit
}

// excursions returns every span of [0, end] during which the shares the envoys held (as
// they received them, until they expired) summed above the limit, computed exactly at the
// instants the shares changed.
func excursions(envoys []*rlqsEnvoy, end time.Duration) []excursion {
	var at []time.Duration
	for _, e := range envoys {
		at = append(at, e.instants()...)
	}
	at = append(at, end)
	slices.Sort(at)
	at = slices.Compact(at)
	var out []excursion
	var cur *excursion
	for _, t := range at {
		if t > end {
			break
		}
		var sum int64
		for _, e := range envoys {
			sum += max(e.shareAt(t), 0)
		}
		switch {
		case sum > rlqsLimit && cur == nil:
			out = append(out, excursion{at: t, peak: sum - rlqsLimit})
			cur = &out[len(out)-1]
		case sum > rlqsLimit:
			cur.peak = max(cur.peak, sum-rlqsLimit)
		case cur != nil:
			cur.length = t - cur.at
			cur = nil
		}
	}
	if cur != nil {
		cur.length = end - cur.at
	}
	return out
}

func runRLQSFleet(t *testing.T, bin string, ttl time.Duration, replicas int, args []string) {
	dir := t.TempDir()
	rules := fmt.Sprintf("domain: fleet\nquota_buckets:\n  - bucket_id: {name: api}\n    requests_per_unit: %d\n    unit: second\n    assignment_ttl: %v\n", rlqsLimit, ttl)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	var servers []*served
	var conns []*grpc.ClientConn
	for i := 0; i < replicas; i++ {
		s := fleetServe(t, bin, append([]string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json", "--config", dir}, args...)...)
		servers = append(servers, s)
		conns = append(conns, s.conn)
	}
	on := func(i int) *grpc.ClientConn { return conns[i%len(conns)] }
	start := time.Now()
	iv := rlqsInterval
	mark := func(d time.Duration) { sleepUntil(start, d) }
	// After a leave or a break the share is held until it expires: with a short TTL the
	// next phase waits for it, with a long one it runs meanwhile.
	held := time.Second
	if ttl < 5*time.Second {
		held += ttl + time.Second/2
	}

	// A alone, then B, then C join; B's demand drops; A leaves; C's stream breaks while C
	// keeps spending; D joins while their shares are held.
	a := startRLQSEnvoy(t, on(0), "A", 800, start)
	mark(1 * time.Second)
	b := startRLQSEnvoy(t, on(1), "B", 500, start)
	mark(2 * time.Second)
	c := startRLQSEnvoy(t, on(0), "C", 100, start)
	// The abuser (another peer address) opens more streams than its cap, while the fleet runs.
	abused := make(chan int, 1)
	go func() { abused <- abuseStreams(t, servers[0].grpcAddr, 120) }()
	mark(3 * time.Second)
	b.set(func(e *rlqsEnvoy) { e.demand = 200 })
	mark(4 * time.Second)
	a.leave()
	tBreak := 4*time.Second + held
	mark(tBreak)
	c.breakStream()
	tJoin := tBreak + held
	mark(tJoin)
	d := startRLQSEnvoy(t, on(1), "D", 300, start)
	freed := max(a.expiry(), c.expiry()) + alloc.DefaultGrace // the server hands them out then
	mark(max(tJoin+time.Second, freed+3*iv+rlqsSlack))
	end := time.Since(start)
	b.leave()
	d.leave()

	all := []*rlqsEnvoy{a, b, c, d}
	phases := []struct {
		name      string
		at, until time.Duration
		envoys    []*rlqsEnvoy
		demands   []float64
		newcomer  *rlqsEnvoy
		from      time.Duration // when the split can be reached: the shares it needs are free
		first     time.Duration // when the first of them is free
	}{
		{"A alone", 0, time.Second, []*rlqsEnvoy{a}, []float64{800}, a, 0, 0},
		{"B joins", time.Second, 2 * time.Second, []*rlqsEnvoy{a, b}, []float64{800, 500}, b, time.Second, time.Second},
		{"C joins", 2 * time.Second, 3 * time.Second, []*rlqsEnvoy{a, b, c}, []float64{800, 500, 100}, c, 2 * time.Second, 2 * time.Second},
		{"B's demand drops", 3 * time.Second, 4 * time.Second, []*rlqsEnvoy{a, b, c}, []float64{800, 200, 100}, nil, 3 * time.Second, 0},
		{"A leaves", 4 * time.Second, tBreak, []*rlqsEnvoy{b, c}, []float64{200, 100}, nil, a.expiry() + alloc.DefaultGrace, 0},
		{"C's stream breaks", tBreak, tJoin, []*rlqsEnvoy{b}, []float64{200}, nil, freed, 0},
		{"D joins", tJoin, end, []*rlqsEnvoy{b, d}, []float64{200, 300}, d, max(tJoin, freed), max(tJoin, min(a.expiry(), c.expiry())+alloc.DefaultGrace)},
	}
	for _, p := range phases {
		want := make([]int64, len(p.demands))
		alloc.MaxMinFair(rlqsLimit, p.demands, want)
		if p.newcomer != nil {
			first, ok := p.newcomer.firstNonZeroAfter(p.at)
			if !ok || first-p.first > 2*iv+rlqsSlack {
				t.Errorf("%s: the newcomer's first non-zero share %v after joining (ok %v), want within 2 intervals (%v) of a share being free for it (%v after joining)", p.name, first-p.at, ok, 2*iv, p.first-p.at)
			}
			t.Logf("%s: the newcomer's first non-zero share %v after joining (%v after a share was free for it)", p.name, (first - p.at).Round(time.Millisecond), (first - p.first).Round(time.Millisecond))
		}
		if p.from+3*iv+rlqsSlack >= p.until {
			t.Logf("%s: the shares it needs are held until %v, after the phase (%v): not checked", p.name, p.from.Round(time.Millisecond), p.until.Round(time.Millisecond))
			continue
		}
		at, ok := settledAt(p.envoys, want, p.from, p.until-10*time.Millisecond)
		if !ok || at-p.from > 3*iv+rlqsSlack {
			var got []int64
			for _, e := range p.envoys {
				got = append(got, e.shareAt(p.until-10*time.Millisecond))
			}
			t.Errorf("%s: max-min shares %v reached %v after they could be (ok %v; at the end of the phase %v), want within 3 intervals (%v)", p.name, want, at-p.from, ok, got, 3*iv)
		}
		t.Logf("%s: max-min shares %v held %v after the change, %v after the shares they need were free", p.name, want, (at - p.at).Round(time.Millisecond), (at - p.from).Round(time.Millisecond))
	}
	exc := excursions(all, end)
	var longest time.Duration
	var peak int64
	for _, x := range exc {
		longest, peak = max(longest, x.length), max(peak, x.peak)
		t.Logf("excursion at %v: %v long, at most %d/s above the limit", x.at.Round(time.Millisecond), x.length, x.peak)
		if x.length > rlqsSkew {
			t.Errorf("the shares held summed above the limit for %v from %v (at most %d/s above), want no excursion longer than %v", x.length, x.at.Round(time.Millisecond), x.peak, rlqsSkew)
		}
	}
	t.Logf("never over: %d excursion(s), the longest %v, at most %d/s above the limit of %d/s", len(exc), longest, peak, rlqsLimit)
	for _, e := range []*rlqsEnvoy{a, b, c} {
		if len(e.denyAll) > 0 {
			t.Errorf("%s was sent DENY_ALL %d times, while its fair share was positive and free", e.name, len(e.denyAll))
		}
	}
	for _, at := range d.denyAll {
		if at >= freed+rlqsSlack {
			t.Errorf("D was sent DENY_ALL at %v, after the shares held for it were free (%v)", at, freed)
		}
	}
	refused := <-abused
	if refused == 0 {
		t.Errorf("the abuser's %d streams were all accepted, want the ones past the per-client cap refused", 120)
	}
	t.Logf("abuser: %d of 120 streams refused with RESOURCE_EXHAUSTED", refused)
}

// abuseStreams opens n streams from 127.0.0.3 without reporting and returns how many were
// refused with RESOURCE_EXHAUSTED; the rest stay open until the test ends.
func abuseStreams(t *testing.T, addr string, n int) int {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); _ = conn.Close() })
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for i := 0; i < n; i++ {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(rctx)
		if err != nil {
			rcancel()
			t.Error(err)
			return 0
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rcancel()
			if _, err := st.Recv(); status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "from this client") {
				mu.Lock()
				refused++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return refused
}
