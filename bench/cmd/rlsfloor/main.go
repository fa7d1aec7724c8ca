// Command rlsfloor is the floor of bench/headtohead.sh: a grpc-go server implementing Envoy's
// rate limit service (envoy.service.ratelimit.v3 ShouldRateLimit) that answers OK to every
// request and does no other work. What it costs per request is what any RLS server built on
// grpc-go pays before deciding anything; a contender's CPU above it is its own work.
//
//	go run ./cmd/rlsfloor -addr 127.0.0.1:27519
//
// It stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// floor answers every ShouldRateLimit with OK.
type floor struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (floor) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

// newServer is the floor's gRPC server: grpc-go's defaults and the one service.
func newServer() *grpc.Server {
	s := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(s, floor{})
	return s
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address (host:port)")
	flag.Parse()
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlsfloor:", err)
		os.Exit(1)
	}
	s := newServer()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; s.Stop() }()
	if err := s.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, "rlsfloor:", err)
		os.Exit(1)
	}
}
