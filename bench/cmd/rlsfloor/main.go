// Command rlsfloor is the floor of bench/headtohead.sh: a grpc-go server implementing Envoy's
// rate limit service (envoy.service.ratelimit.v3 ShouldRateLimit) that answers OK to every
// request and does no other work. What it costs per request is what any RLS server built on
// grpc-go pays before deciding anything; a contender's CPU above it is its own work.
//
// With -redis ADDR it first waits for one Redis round trip per request (a PING, go-redis's
// pool of 64 connections): the floor of a server that decides on Redis, whose closed-loop
// callers wait that long for each answer, so that gRPC's per-request cost is paid at the
// request rate such a server sees (issue 34, item 4). Its CPU includes sending the PING and
// reading its reply, the least a Redis client does.
//
//	go run ./cmd/rlsfloor -addr 127.0.0.1:27519
//	go run ./cmd/rlsfloor -addr 127.0.0.1:27519 -redis 127.0.0.1:6379
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
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
)

// floor answers every ShouldRateLimit with OK, after a PING to redis when it is set.
type floor struct {
	rlsv3.UnimplementedRateLimitServiceServer
	redis *goredis.Client
}

func (f floor) ShouldRateLimit(ctx context.Context, _ *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if f.redis != nil {
		if err := f.redis.Ping(ctx).Err(); err != nil {
			return nil, err
		}
	}
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

// newServer is the floor's gRPC server: grpc-go's defaults and the one service, waiting for a
// round trip to redis per request when it is non-nil.
func newServer(redis *goredis.Client) *grpc.Server {
	s := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(s, floor{redis: redis})
	return s
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address (host:port)")
	redisAddr := flag.String("redis", "", "wait for a PING to this Redis (host:port) per request")
	flag.Parse()
	var redis *goredis.Client
	if *redisAddr != "" {
		redis = goredis.NewClient(&goredis.Options{Addr: *redisAddr, PoolSize: 64, MaxRetries: -1})
		defer redis.Close()
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlsfloor:", err)
		os.Exit(1)
	}
	s := newServer(redis)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; s.Stop() }()
	if err := s.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, "rlsfloor:", err)
		os.Exit(1)
	}
}
