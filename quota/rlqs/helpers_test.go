package rlqs_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/sluicetest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// rules loads body as a rules file.
func rules(t testing.TB, body string) *config.Config {
	t.Helper()
	c, err := config.LoadFS(fstest.MapFS{"rules.yaml": {Data: []byte(body)}}, "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serve starts svc on a loopback gRPC server and returns a connection to it.
func serve(t *testing.T, svc *rlqs.Service) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	svc.Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// fakeEnvoy is an RLQS client built from the go-control-plane types, as Envoy's
// rate_limit_quota filter speaks it: one stream, the domain in the first report.
type fakeEnvoy struct {
	t      *testing.T
	domain string
	stream grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
	cancel context.CancelFunc
	resps  chan *rlqspb.RateLimitQuotaResponse
	done   chan error
	sent   bool
	// current is the last action received per bucket (quota.BucketKey), answers and pushes
	// alike, as Envoy applies them.
	current map[string]*rlqspb.RateLimitQuotaResponse_BucketAction
	// received is when the stream last received a message (Unix ns), as Envoy counts an
	// assignment's TTL from it.
	received atomic.Int64
}

func newFakeEnvoy(t *testing.T, conn *grpc.ClientConn, domain string) *fakeEnvoy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeEnvoy{t: t, domain: domain, stream: st, cancel: cancel, resps: make(chan *rlqspb.RateLimitQuotaResponse, 1024), done: make(chan error, 1),
		current: map[string]*rlqspb.RateLimitQuotaResponse_BucketAction{}}
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				f.done <- err
				return
			}
			f.received.Store(time.Now().UnixNano())
			f.resps <- r
		}
	}()
	t.Cleanup(f.close)
	return f
}

func (f *fakeEnvoy) close() { f.cancel() }

func usage(bucket map[string]string, elapsed time.Duration, allowed, denied uint64) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
	return &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqspb.BucketId{Bucket: bucket},
		TimeElapsed: durationpb.New(elapsed), NumRequestsAllowed: allowed, NumRequestsDenied: denied}
}

// send sends one report (naming the domain the first time).
func (f *fakeEnvoy) send(us ...*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage) {
	f.t.Helper()
	m := &rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: us}
	if !f.sent {
		m.Domain = f.domain
		f.sent = true
	}
	if err := f.stream.Send(m); err != nil {
		f.t.Fatalf("send: %v", err)
	}
}

// report sends one report and waits (bounded real time) for the answer, and returns what
// the stream delivered from then until it is quiet, each bucket's newest action once, in
// the order the buckets first came: the answer, and the pushes that follow it (a share
// still held by others is pushed once their shrinks are delivered).
func (f *fakeEnvoy) report(us ...*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage) *rlqspb.RateLimitQuotaResponse {
	f.t.Helper()
	f.settle()
	f.send(us...)
	merged := &rlqspb.RateLimitQuotaResponse{}
	at := map[string]int{}
	add := func(r *rlqspb.RateLimitQuotaResponse) {
		for _, a := range r.GetBucketAction() {
			k := quota.BucketKey(a.GetBucketId().GetBucket())
			if i, ok := at[k]; ok {
				merged.BucketAction[i] = a
				continue
			}
			at[k] = len(merged.BucketAction)
			merged.BucketAction = append(merged.BucketAction, a)
		}
	}
	add(f.recv())
	for _, r := range f.settleAll() {
		add(r)
	}
	return merged
}

// settleAll applies the messages received until none arrives for 30 ms, and returns them.
func (f *fakeEnvoy) settleAll() []*rlqspb.RateLimitQuotaResponse {
	var out []*rlqspb.RateLimitQuotaResponse
	for {
		select {
		case r := <-f.resps:
			f.apply(r)
			out = append(out, r)
		case <-time.After(30 * time.Millisecond):
			return out
		}
	}
}

// settle applies the messages received until none arrives for 30 ms, and returns the last.
func (f *fakeEnvoy) settle() *rlqspb.RateLimitQuotaResponse {
	all := f.settleAll()
	if len(all) == 0 {
		return nil
	}
	return all[len(all)-1]
}

// apply records r's actions as the current ones.
func (f *fakeEnvoy) apply(r *rlqspb.RateLimitQuotaResponse) {
	for _, a := range r.GetBucketAction() {
		f.current[quota.BucketKey(a.GetBucketId().GetBucket())] = a
	}
}

// latest returns the current share of bucket (see share), after settling.
func (f *fakeEnvoy) latest(bucket map[string]string) (int64, time.Duration) {
	f.settle()
	a := f.current[quota.BucketKey(bucket)]
	if a == nil {
		return -1, 0
	}
	return share(a)
}

func (f *fakeEnvoy) recv() *rlqspb.RateLimitQuotaResponse {
	f.t.Helper()
	select {
	case r := <-f.resps:
		f.apply(r)
		return r
	case err := <-f.done:
		select {
		case r := <-f.resps: // sent before the stream ended
			f.done <- err
			f.apply(r)
			return r
		default:
		}
		f.t.Fatalf("stream ended: %v", err)
	case <-time.After(10 * time.Second):
		f.t.Fatal("no answer within 10s")
	}
	return nil
}

// ended waits for the stream to end and returns its error.
func (f *fakeEnvoy) ended() error {
	f.t.Helper()
	select {
	case err := <-f.done:
		return err
	case r := <-f.resps:
		f.t.Fatalf("answered %v, want the stream to end", r)
	case <-time.After(10 * time.Second):
		f.t.Fatal("stream still open after 10s")
	}
	return nil
}

// share returns the requests per period of a token bucket or requests_per_time_unit
// assignment, and its TTL; -1 for an abandon or a blanket rule.
func share(a *rlqspb.RateLimitQuotaResponse_BucketAction) (int64, time.Duration) {
	q := a.GetQuotaAssignmentAction()
	if q == nil {
		return -1, 0
	}
	s := q.GetRateLimitStrategy()
	switch {
	case s.GetTokenBucket() != nil:
		return int64(s.GetTokenBucket().GetTokensPerFill().GetValue()), q.GetAssignmentTimeToLive().AsDuration()
	case s.GetRequestsPerTimeUnit() != nil:
		return int64(s.GetRequestsPerTimeUnit().GetRequestsPerTimeUnit()), q.GetAssignmentTimeToLive().AsDuration()
	}
	return -1, q.GetAssignmentTimeToLive().AsDuration()
}

func newClock() *sluicetest.ManualClock { return sluicetest.NewManualClock(t0) }

// waitFor polls cond for up to 10 s of real time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdings records the current assignment of each client with its expiry (a newer one,
// answer or push, replaces it, as Envoy applies it), to check what the fleet may spend at
// an instant once the pushes have been delivered.
type holdings struct {
	t     *testing.T
	clock *sluicetest.ManualClock
	limit int64
	held  map[string][]held
}

type held struct {
	share   int64
	expires time.Time
}

func newHoldings(t *testing.T, clock *sluicetest.ManualClock, limit int64) *holdings {
	return &holdings{t: t, clock: clock, limit: limit, held: map[string][]held{}}
}

// add records the current assignment of bucket on f as client's, and returns the share.
func (h *holdings) add(client string, f *fakeEnvoy, bucket map[string]string) int64 {
	h.t.Helper()
	s, ttl := f.latest(bucket)
	h.held[client] = []held{{s, h.clock.Now().Add(ttl)}}
	return s
}

// check fails the test if the clients may spend more than the limit now.
func (h *holdings) check() {
	h.t.Helper()
	var sum int64
	now := h.clock.Now()
	for _, hs := range h.held {
		var m int64
		for _, x := range hs {
			if x.expires.After(now) {
				m = max(m, x.share)
			}
		}
		sum += m
	}
	if sum > h.limit {
		h.t.Fatalf("at %v the clients may spend %d > %d (%v)", now.Sub(t0), sum, h.limit, h.held)
	}
}
