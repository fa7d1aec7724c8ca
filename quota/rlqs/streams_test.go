package rlqs_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/quota/rlqs"
)

// dialFrom returns a connection to addr from the loopback address local (127.0.0.x), so
// one test plays several clients.
func dialFrom(t *testing.T, addr, local string) *grpc.ClientConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// openStream opens a stream on conn and sends one report of bucket b (no report when b is
// ""); it returns the stream and a channel with its end.
func openStream(t *testing.T, conn *grpc.ClientConn, b string) (grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse], chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b != "" {
		m := &rlqspb.RateLimitQuotaUsageReports{Domain: "envoy", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqspb.BucketId{Bucket: map[string]string{"name": b}}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 1}}}
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	end := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				end <- err
				return
			}
		}
	}()
	return st, end
}

func waitEnd(t *testing.T, end chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-end:
		return err
	case <-time.After(within):
		t.Fatalf("stream still open after %v", within)
	}
	return nil
}

// TestStreamsCappedPerClient (issue 22, item 4): a client (one peer address) opening more
// streams than its cap has the extra ones refused with RESOURCE_EXHAUSTED, while another
// client (another address) still opens and uses its streams; the abuser's streams closed,
// its slots are free again.
func TestStreamsCappedPerClient(t *testing.T) {
	rs := rules(t, fairRules)
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rs }, MaxStreamsPerClient: 3, MaxStreams: 5})
	addr := serve(t, svc).Target()
	abuser, other := dialFrom(t, addr, "127.0.0.1"), dialFrom(t, addr, "127.0.0.2")
	for i := 0; i < 3; i++ {
		openStream(t, abuser, "")
	}
	waitFor(t, "three streams open", func() bool { return svc.Streams() == 3 })
	_, end := openStream(t, abuser, "")
	if err := waitEnd(t, end, 10*time.Second); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "from this client") {
		t.Fatalf("fourth stream of one client: %v, want RESOURCE_EXHAUSTED", err)
	}
	_, end = openStream(t, other, "x")
	waitFor(t, "the other client's stream open", func() bool { return svc.Streams() == 4 })
	select {
	case err := <-end:
		t.Fatalf("another client's stream ended: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestIdleStreamClosed (issue 22, item 4): a stream that sends no report within the idle
// timeout is closed with DEADLINE_EXCEEDED, one that reports stays open; the closed
// stream's goroutines are gone.
func TestIdleStreamClosed(t *testing.T) {
	testenv.Timing(t)
	rs := rules(t, fairRules)
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rs }, StreamIdleTimeout: 300 * time.Millisecond})
	conn := dialFrom(t, serve(t, svc).Target(), "127.0.0.1")
	start := time.Now()
	_, end := openStream(t, conn, "")
	err := waitEnd(t, end, 10*time.Second)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("silent stream: %v, want DEADLINE_EXCEEDED", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 5*time.Second {
		t.Fatalf("closed after %v, want the 300ms timeout", took)
	}
	st, end := openStream(t, conn, "x")
	for i := 0; i < 5; i++ {
		time.Sleep(100 * time.Millisecond)
		m := &rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqspb.BucketId{Bucket: map[string]string{"name": "x"}}, TimeElapsed: durationpb.New(100 * time.Millisecond), NumRequestsAllowed: 1}}}
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-end:
		t.Fatalf("a reporting stream ended: %v", err)
	default:
	}
	waitFor(t, "the idle stream forgotten", func() bool { return svc.Streams() == 1 })
}

// TestStreamMemory measures what an open stream that reported one bucket costs: live heap
// and goroutines per stream, the server's and the client's together (both in this process,
// so an upper bound of the server's), for docs/BENCHMARKS.md; it fails above 64 KiB or 8
// goroutines per stream.
func TestStreamMemory(t *testing.T) {
	const n = 500
	rs := rules(t, fairRules)
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rs }, MaxStreamsPerClient: n + 1})
	conn := serve(t, svc)
	openStream(t, conn, "x") // the connection's own cost, before measuring
	waitFor(t, "the first stream", func() bool { return svc.Streams() == 1 })
	heap0, g0 := testenv.LiveHeap(), runtime.NumGoroutine()
	for i := 0; i < n; i++ {
		openStream(t, conn, "x")
	}
	waitFor(t, "every stream open", func() bool { return svc.Streams() == n+1 })
	time.Sleep(100 * time.Millisecond) // the reports handled
	per := float64(int64(testenv.LiveHeap())-int64(heap0)) / n
	goroutines := float64(runtime.NumGoroutine()-g0) / n
	t.Logf("per open stream (server and client): %.0f bytes of live heap, %.1f goroutines", per, goroutines)
	if per > 64<<10 || goroutines > 8 {
		t.Fatalf("per stream: %.0f bytes, %.1f goroutines", per, goroutines)
	}
}

// TestStreamsKeptForNewcomers (issue 31, item 7): the last streams of the global cap
// go only to clients with none open, so a client that took every stream it may still
// leaves room for clients not yet seen, one stream each.
func TestStreamsKeptForNewcomers(t *testing.T) {
	rs := rules(t, fairRules)
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rs }, MaxStreams: 10, NewcomerStreams: 3})
	addr := serve(t, svc).Target()
	greedy := dialFrom(t, addr, "127.0.0.1")
	for i := 0; i < 7; i++ {
		openStream(t, greedy, "")
	}
	waitFor(t, "seven streams open", func() bool { return svc.Streams() == 7 })
	refused := func(conn *grpc.ClientConn, want string) {
		t.Helper()
		_, end := openStream(t, conn, "")
		if err := waitEnd(t, end, 10*time.Second); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), want) {
			t.Fatalf("stream %v, want RESOURCE_EXHAUSTED (%s)", err, want)
		}
	}
	refused(greedy, "kept for clients with none open")
	second := dialFrom(t, addr, "127.0.0.2")
	openStream(t, second, "")
	waitFor(t, "a new client's stream", func() bool { return svc.Streams() == 8 })
	refused(second, "kept for clients with none open")
	openStream(t, dialFrom(t, addr, "127.0.0.3"), "")
	openStream(t, dialFrom(t, addr, "127.0.0.4"), "")
	waitFor(t, "the cap reached by new clients", func() bool { return svc.Streams() == 10 })
	refused(dialFrom(t, addr, "127.0.0.5"), "streams open, the maximum")
}

// TestStreamsCappedByCertificate (issue 31, item 7): with mutual TLS a client is its
// certificate, whatever address it connects from: one certificate used from two addresses
// shares one cap, another certificate from the same address has its own.
func TestStreamsCappedByCertificate(t *testing.T) {
	ca := testenv.NewCA(t, "rlqs-ca", t.TempDir())
	server, abuser, envoy := ca.Issue(t, "server", "127.0.0.1"), ca.Issue(t, "abuser", "spiffe://example.org/abuser"), ca.Issue(t, "envoy", "spiffe://example.org/envoy")
	rs := rules(t, fairRules)
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rs }, MaxStreamsPerClient: 3, NewcomerStreams: -1})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{server.TLSCertificate(t)},
		ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})))
	svc.Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	dial := func(local string, leaf testenv.Leaf) *grpc.ClientConn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate(t)}, RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12})
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(creds),
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	a1, a2 := dial("127.0.0.1", abuser), dial("127.0.0.2", abuser)
	openStream(t, a1, "")
	openStream(t, a1, "")
	openStream(t, a2, "")
	waitFor(t, "three streams", func() bool { return svc.Streams() == 3 })
	_, end := openStream(t, a2, "")
	if err := waitEnd(t, end, 10*time.Second); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "from this client") {
		t.Fatalf("a fourth stream of one certificate from another address: %v, want RESOURCE_EXHAUSTED", err)
	}
	_, end = openStream(t, dial("127.0.0.1", envoy), "x")
	waitFor(t, "another certificate's stream", func() bool { return svc.Streams() == 4 })
	select {
	case err := <-end:
		t.Fatalf("another certificate's stream ended: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestStreamEndsLoggedThrottled (issue 31, item 7): a storm of streams ending with errors
// writes one INFO line a second, the next one counting those held back, not a line each.
func TestStreamEndsLoggedThrottled(t *testing.T) {
	var logs testenv.LogBuffer
	clock := newClock()
	rs := rules(t, fairRules)
	svc := rlqs.New(rlqs.Config{Rules: func() *config.Config { return rs }, Clock: clock,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	conn := serve(t, svc)
	bad := func() {
		t.Helper()
		st, end := openStream(t, conn, "")
		if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{}); err != nil { // no domain: ended
			t.Fatal(err)
		}
		if err := waitEnd(t, end, 10*time.Second); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("ended with %v, want InvalidArgument", err)
		}
	}
	for i := 0; i < 50; i++ {
		bad()
	}
	waitFor(t, "every stream forgotten", func() bool { return svc.Streams() == 0 })
	if n := len(logs.Records(t, "rlqs stream ended")); n != 1 {
		t.Fatalf("%d lines for 50 streams ended within a second, want 1", n)
	}
	clock.Advance(time.Second)
	bad()
	waitFor(t, "the stream forgotten", func() bool { return svc.Streams() == 0 })
	recs := logs.Records(t, "rlqs stream ended")
	if len(recs) != 2 || recs[1]["suppressed"] != float64(49) {
		t.Fatalf("lines %v, want a second one a second later counting the 49 held back", recs)
	}
}
