package server_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// TestInFlightRequestSurvivesShutdown: a request the store is still deciding when the
// server is told to stop completes with its answer; the listener closes meanwhile, and
// Serve returns only after the answer.
func TestInFlightRequestSurvivesShutdown(t *testing.T) {
	mem, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	gate := sluicetest.NewGateStore(mem)
	srv, err := server.New(server.Config{Config: rls.Config{Store: gate, Rules: compile(t, goldenRules), ReloadInterval: -1}, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", ShutdownTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	type answer struct {
		resp *rlsv3.RateLimitResponse
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(context.Background(), req(desc("remote_address", "in-flight")))
		answered <- answer{resp, err}
	}()
	select {
	case <-gate.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the store")
	}
	cancel() // SIGTERM

	// The listener closes while the request is still in the store.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", srv.GRPCAddr(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("gRPC listener still accepting 10 s after shutdown began")
		}
		time.Sleep(10 * time.Millisecond) // polling a socket, no clock to pass
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) with a request in flight", err)
	case a := <-answered:
		t.Fatalf("request answered (%v, %v) before the store decided", a.resp, a.err)
	default:
	}

	gate.Release()
	select {
	case a := <-answered:
		if a.err != nil {
			t.Fatalf("in-flight request failed: %v", a.err)
		}
		if got := summary(a.resp); !strings.HasPrefix(got, "OK") {
			t.Errorf("in-flight request: %s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight request not answered after the store released it")
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the last request")
	}
}

// TestReflection: server reflection works with the server's own codec and lists the RLS
// service and health (what ghz and grpcurl use).
func TestReflection(t *testing.T) {
	h := start(t, goldenRules)
	stream, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	got := strings.Join(names, " ")
	for _, want := range []string{rlsv3.RateLimitService_ServiceDesc.ServiceName, "grpc.health.v1.Health"} {
		if !strings.Contains(got, want) {
			t.Errorf("reflection lists %q, missing %s", got, want)
		}
	}
}
