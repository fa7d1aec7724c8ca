package connectlimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/connectlimit"
	"github.com/sluicehq/sluice/store/memory"
)

// The procedures of the tests' service: a unary Ping and a server stream Watch, handlers made
// with connect's own generic constructors over well-known types (no generated code).
const (
	pingProcedure  = "/sluice.test.v1.Test/Ping"
	watchProcedure = "/sluice.test.v1.Test/Watch"
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

// mustNew builds an Interceptor or fails the test.
func mustNew(t *testing.T, l *sluice.Limiter, routes []connectlimit.Route, opts ...connectlimit.Option) *connectlimit.Interceptor {
	t.Helper()
	in, err := connectlimit.New(l, routes, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// every is one route for every call with limits.
func every(limits ...connectlimit.Limit) []connectlimit.Route {
	return []connectlimit.Route{{Limits: limits}}
}

// transport is how a client reaches the server: Connect's protocol over HTTP/1.1, gRPC over
// h2c (HTTP/2 without TLS), or gRPC-Web over HTTP/1.1.
type transport struct {
	name string
	h2c  bool
	opt  connect.ClientOption
}

var transports = []transport{
	{"connect_http1", false, nil},
	{"grpc_h2c", true, connect.WithGRPC()},
	{"grpcweb_http1", false, connect.WithGRPCWeb()},
}

// server runs the test service behind an Interceptor on a loopback port, and clients of it.
type server struct {
	url     string
	client  *http.Client
	tr      transport
	calls   atomic.Int64  // handler runs: Ping calls and Watch streams
	release chan struct{} // when not nil, Ping waits for it, and Watch after its first message
}

// serve starts the service with in on its handlers (none when nil), reached through tr.
func serve(t *testing.T, in *connectlimit.Interceptor, tr transport) *server {
	t.Helper()
	s := &server{tr: tr}
	var opts []connect.HandlerOption
	if in != nil {
		opts = append(opts, connect.WithInterceptors(in))
	}
	mux := http.NewServeMux()
	mux.Handle(pingProcedure, connect.NewUnaryHandler(pingProcedure, func(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		s.calls.Add(1)
		if s.release != nil {
			select {
			case <-s.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return connect.NewResponse(&emptypb.Empty{}), nil
	}, opts...))
	mux.Handle(watchProcedure, connect.NewServerStreamHandler(watchProcedure, func(ctx context.Context, _ *connect.Request[emptypb.Empty], st *connect.ServerStream[structpb.Value]) error {
		s.calls.Add(1)
		for i := range 3 {
			if err := st.Send(structpb.NewNumberValue(float64(i))); err != nil {
				return err
			}
			if i == 0 && s.release != nil {
				select {
				case <-s.release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return nil
	}, opts...))
	srv := httptest.NewUnstartedServer(mux)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(tr.h2c)
	srv.Config.Protocols = p
	srv.Start()
	t.Cleanup(srv.Close)
	cp := new(http.Protocols)
	if tr.h2c {
		cp.SetUnencryptedHTTP2(true)
	} else {
		cp.SetHTTP1(true)
	}
	s.url, s.client = srv.URL, &http.Client{Transport: &http.Transport{Protocols: cp}}
	t.Cleanup(s.client.CloseIdleConnections)
	return s
}

// clientOptions are the options of a client through s's transport, with in's interceptor
// (none when nil).
func (s *server) clientOptions(in *connectlimit.Interceptor) []connect.ClientOption {
	var opts []connect.ClientOption
	if s.tr.opt != nil {
		opts = append(opts, s.tr.opt)
	}
	if in != nil {
		opts = append(opts, connect.WithInterceptors(in))
	}
	return opts
}

// ping calls Ping with the header pairs kv through a client with clientIn (nil: none).
func (s *server) ping(t *testing.T, clientIn *connectlimit.Interceptor, kv ...string) (*connect.Response[emptypb.Empty], error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.pingCtx(ctx, clientIn, kv...)
}

func (s *server) pingCtx(ctx context.Context, clientIn *connectlimit.Interceptor, kv ...string) (*connect.Response[emptypb.Empty], error) {
	c := connect.NewClient[emptypb.Empty, emptypb.Empty](s.client, s.url+pingProcedure, s.clientOptions(clientIn)...)
	req := connect.NewRequest(&emptypb.Empty{})
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header().Add(kv[i], kv[i+1])
	}
	return c.CallUnary(ctx, req)
}

// watch opens a Watch stream with the header pairs kv and returns it after its first message,
// or the error that ended it before one.
func (s *server) watch(ctx context.Context, clientIn *connectlimit.Interceptor, kv ...string) (*connect.ServerStreamForClient[structpb.Value], error) {
	c := connect.NewClient[emptypb.Empty, structpb.Value](s.client, s.url+watchProcedure, s.clientOptions(clientIn)...)
	req := connect.NewRequest(&emptypb.Empty{})
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header().Add(kv[i], kv[i+1])
	}
	st, err := c.CallServerStream(ctx, req)
	if err != nil {
		return nil, err
	}
	if !st.Receive() {
		err := st.Err()
		_ = st.Close()
		if err == nil {
			err = errors.New("stream ended without a message")
		}
		return nil, err
	}
	return st, nil
}

// refusal is a refused call's error as a client reads it: its code, message, headers and
// details.
type refusal struct {
	code  connect.Code
	msg   string
	meta  http.Header
	retry *errdetails.RetryInfo
	quota *errdetails.QuotaFailure
}

// refusalOf parses err, which must be a *connect.Error.
func refusalOf(t *testing.T, err error) refusal {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T), want a *connect.Error", err, err)
	}
	r := refusal{code: ce.Code(), msg: ce.Message(), meta: ce.Meta()}
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			t.Fatalf("detail %s: %v", d.Type(), err)
		}
		switch v := v.(type) {
		case *errdetails.RetryInfo:
			r.retry = v
		case *errdetails.QuotaFailure:
			r.quota = v
		default:
			t.Fatalf("unexpected detail %T", v)
		}
	}
	return r
}
