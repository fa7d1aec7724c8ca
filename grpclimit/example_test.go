package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// A server limits each API key to one call a second; the client reads the status details of
// the call it was refused.
func Example() {
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store, _ := memory.New(memory.WithClock(clock)) // omit WithClock outside tests
	defer store.Close()
	in, err := grpclimit.New(sluice.New(store), []grpclimit.Route{{
		Method: "", // every call; "/pkg.Service/" or "/pkg.Service/Method" for one service or method
		Limits: []grpclimit.Limit{{Name: "per-key", Rule: sluice.TokenBucket(1, time.Second, 1), Key: grpclimit.KeyMetadata("x-api-key")}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(in.Unary()), grpc.ChainStreamInterceptor(in.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "alice")
	for range 2 {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		st := status.Convert(err)
		fmt.Println(st.Code())
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				fmt.Println("retry in", d.GetRetryDelay().AsDuration())
			case *errdetails.QuotaFailure:
				fmt.Println("quota", d.GetViolations()[0].GetQuotaId()) // the subject hashes the key: "per-key:hash:..."
			}
		}
	}
	// Output:
	// OK
	// ResourceExhausted
	// retry in 1s
	// quota per-key
}

// A client keeps its calls to a downstream service within 100 a second, waiting up to
// 50 ms for a slot (never past a call's deadline) rather than failing at once.
func ExampleInterceptor_UnaryClient() {
	store, _ := memory.New()
	defer store.Close()
	in, err := grpclimit.New(sluice.New(store), []grpclimit.Route{{
		Limits: []grpclimit.Limit{{Name: "billing-api", Rule: sluice.TokenBucket(100, time.Second, 10)}}, // no Key: one budget
	}}, grpclimit.WithWait(50*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, err := grpc.NewClient("billing.internal:443", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(in.UnaryClient()), grpc.WithChainStreamInterceptor(in.StreamClient()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	fmt.Println("calls through conn are limited")
	// Output: calls through conn are limited
}
