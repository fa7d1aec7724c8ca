package bench

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/store/memory"
)

// The gRPC interceptor's overhead, on the memory store, with a rule 10k clients stay under
// (a token bucket of 10^6 a second each), so calls are admitted. Run the whole benchmark
// several times and compare medians:
//
//	cd bench && for i in $(seq 6); do go test -run '^$' -bench 'GRPC' -benchmem; done | tee grpc.txt

const grpcMethod = "/grpc.health.v1.Health/Check"

// grpcContexts returns the incoming contexts of calls from 10k clients: a TCP peer each
// (10.x.y.z), or, behind a trusted proxy, the proxy's peer and an x-forwarded-for entry,
// with an x-api-key entry in both cases.
func grpcContexts(behindProxy bool) []context.Context {
	out := make([]context.Context, len(keys))
	for i := range out {
		client := net.IPv4(10, byte(i>>16), byte(i>>8), byte(i))
		addr := &net.TCPAddr{IP: client, Port: 40000}
		md := metadata.Pairs("x-api-key", keys[i])
		if behindProxy {
			addr = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}
			md.Append("x-forwarded-for", client.String())
		}
		out[i] = metadata.NewIncomingContext(peer.NewContext(context.Background(), &peer.Peer{Addr: addr}), md)
	}
	return out
}

// BenchmarkGRPCInterceptor calls the unary server interceptor directly with a handler that
// does nothing: the cost grpclimit adds to a call, without gRPC's own (see BenchmarkGRPCCall).
// "bare" is the handler alone.
func BenchmarkGRPCInterceptor(b *testing.B) {
	st, err := memory.New()
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	trusted, err := clientip.New([]string{"192.0.2.0/24"})
	if err != nil {
		b.Fatal(err)
	}
	rule := sluice.TokenBucket(perSecond, time.Second, perSecond)
	limit := func(name string, key grpclimit.Key) grpclimit.Limit {
		return grpclimit.Limit{Name: name, Rule: rule, Key: key}
	}
	direct, proxied := grpcContexts(false), grpcContexts(true)
	for _, tc := range []struct {
		name   string
		limits []grpclimit.Limit
		ctxs   []context.Context
	}{
		{"bare", nil, direct},
		{"method", []grpclimit.Limit{limit("method", grpclimit.KeyMethod())}, direct},
		{"api_key", []grpclimit.Limit{limit("key", grpclimit.KeyMetadata("x-api-key"))}, direct},
		{"peer_ip", []grpclimit.Limit{limit("ip", grpclimit.KeyIP(trusted, 64))}, direct},
		{"peer_ip_behind_proxy", []grpclimit.Limit{limit("ip", grpclimit.KeyIP(trusted, 64))}, proxied},
		{"peer_ip_and_api_key_method", []grpclimit.Limit{limit("ip", grpclimit.KeyIP(trusted, 64)),
			limit("key_method", grpclimit.Keys(grpclimit.KeyMetadata("x-api-key"), grpclimit.KeyMethod()))}, direct},
	} {
		b.Run(tc.name, func(b *testing.B) {
			in, err := grpclimit.New(sluice.New(st), []grpclimit.Route{{Limits: tc.limits}}, grpclimit.WithHeaderStyle(grpclimit.HeadersNone))
			if err != nil {
				b.Fatal(err)
			}
			intercept := in.Unary()
			info := &grpc.UnaryServerInfo{FullMethod: grpcMethod}
			handler := func(context.Context, any) (any, error) { return nil, nil }
			b.ReportAllocs()
			i := 0
			cpu := processCPU()
			for b.Loop() {
				if _, err := intercept(tc.ctxs[i%len(tc.ctxs)], nil, info, handler); err != nil {
					b.Fatal(err)
				}
				i++
			}
			reportCPU(b, cpu)
			if s := in.Stats(); s.Denied+s.StoreErrors+s.Invalid > 0 {
				b.Fatalf("not every call admitted: %+v", s)
			}
		})
	}
}

// BenchmarkGRPCCall makes unary calls (health Check) to a server on a loopback TCP port,
// without an interceptor ("bare") and with grpclimit keying by peer IP and sending the
// x-ratelimit headers (and without them): the latency a client sees, gRPC and the network
// stack included.
func BenchmarkGRPCCall(b *testing.B) {
	st, err := memory.New()
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	routes := []grpclimit.Route{{Limits: []grpclimit.Limit{
		{Name: "ip", Rule: sluice.TokenBucket(perSecond, time.Second, perSecond), Key: grpclimit.KeyIP(nil, 64)}}}}
	in, err := grpclimit.New(sluice.New(st), routes, grpclimit.WithHeaderStyle(grpclimit.HeadersX))
	if err != nil {
		b.Fatal(err)
	}
	quiet, err := grpclimit.New(sluice.New(st), routes, grpclimit.WithHeaderStyle(grpclimit.HeadersNone))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []grpc.ServerOption
	}{
		{"bare", nil},
		{"grpclimit", []grpc.ServerOption{grpc.ChainUnaryInterceptor(in.Unary())}},
		{"grpclimit_no_headers", []grpc.ServerOption{grpc.ChainUnaryInterceptor(quiet.Unary())}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			client, stop := healthServer(b, tc.opts...)
			defer stop()
			ctx := context.Background()
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
	if s := in.Stats(); s.Denied+s.StoreErrors+s.Invalid > 0 {
		b.Fatalf("not every call admitted: %+v", s)
	}
}

// healthServer serves the health service on a loopback TCP port and returns a client of it.
func healthServer(b *testing.B, opts ...grpc.ServerOption) (healthpb.HealthClient, func()) {
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	return healthpb.NewHealthClient(conn), func() {
		_ = conn.Close()
		srv.Stop()
	}
}

// reportCPU reports the process's CPU time (processCPU) per op since start (every goroutine's: for a
// loopback call, the client's and the server's) as cpu-ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}
