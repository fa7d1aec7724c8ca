package grpclimit_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/store/memory"
)

// checkMethod and watchMethod are the full method names of the health service, the real
// service the tests' servers run.
const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// newMemory returns a limiter on a memory store reading clock.
func newMemory(t *testing.T, clock sluice.Clock) *sluice.Limiter {
	t.Helper()
	st, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return sluice.New(st, sluice.WithClock(clock))
}

// server is a gRPC server on a loopback TCP port running the health service behind the
// interceptors, and a client connected to it.
type server struct {
	client healthpb.HealthClient
	calls  atomic.Int64 // unary calls that reached the service
}

// serve starts the server with in's server interceptors (none when in is nil) and dials it
// with the client interceptors of clientIn (none when nil).
func serve(t *testing.T, in, clientIn *grpclimit.Interceptor) *server {
	t.Helper()
	s := &server{}
	count := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		s.calls.Add(1)
		return h(ctx, req)
	}
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(count)}
	if in != nil {
		opts = []grpc.ServerOption{grpc.ChainUnaryInterceptor(in.Unary(), count), grpc.ChainStreamInterceptor(in.Stream())}
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if clientIn != nil {
		dial = append(dial, grpc.WithChainUnaryInterceptor(clientIn.UnaryClient()),
			grpc.WithChainStreamInterceptor(clientIn.StreamClient()))
	}
	conn, err := grpc.NewClient(lis.Addr().String(), dial...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s.client = healthpb.NewHealthClient(conn)
	return s
}

// reply is what a client saw of one call.
type reply struct {
	code   codes.Code
	msg    string
	header metadata.MD
	retry  *errdetails.RetryInfo
	quota  *errdetails.QuotaFailure
}

// check calls Check with the outgoing metadata md (key, value pairs) and the service name
// service, and reads the status details a client that honours them reads.
func (s *server) check(t *testing.T, service string, md ...string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.checkCtx(t, metadata.AppendToOutgoingContext(ctx, md...), service)
}

func (s *server) checkCtx(t *testing.T, ctx context.Context, service string) reply {
	t.Helper()
	var header, trailer metadata.MD
	_, err := s.client.Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.Header(&header), grpc.Trailer(&trailer))
	r := replyOf(t, err)
	r.header = metadata.Join(header, trailer)
	return r
}

// replyOf reads a call's status and its RetryInfo and QuotaFailure details.
func replyOf(t *testing.T, err error) reply {
	t.Helper()
	st := status.Convert(err)
	r := reply{code: st.Code(), msg: st.Message()}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			r.retry = d
		case *errdetails.QuotaFailure:
			r.quota = d
		case error:
			t.Fatalf("undecodable detail: %v", d)
		}
	}
	return r
}

// header returns the single value of a header entry, failing when there is not exactly one.
func (r reply) headerValue(t *testing.T, name string) string {
	t.Helper()
	if vs := r.header.Get(name); len(vs) == 1 {
		return vs[0]
	}
	t.Fatalf("header %s: %q, want one value (all: %v)", name, r.header.Get(name), r.header)
	return ""
}

// mustNew builds an Interceptor, failing the test on error.
func mustNew(t *testing.T, l *sluice.Limiter, routes []grpclimit.Route, opts ...grpclimit.Option) *grpclimit.Interceptor {
	t.Helper()
	in, err := grpclimit.New(l, routes, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// every returns the default route with the given limits.
func every(limits ...grpclimit.Limit) []grpclimit.Route {
	return []grpclimit.Route{{Limits: limits}}
}

// hashedSubject is the QuotaFailure subject of a refusal under the store key "name:key": the
// key hashed as telemetry hashes request values (issue 31, item 2).
func hashedSubject(storeKey string) string {
	name, key, _ := strings.Cut(storeKey, ":")
	return name + ":" + redact.Hash(key)
}
