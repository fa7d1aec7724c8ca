package main

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestFloorAnswersOK calls the floor over a real gRPC connection: every request, whatever it
// asks, is answered OK.
func TestFloorAnswersOK(t *testing.T) {
	client := startFloor(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, req := range []*rlsv3.RateLimitRequest{
		{},
		{Domain: "bench", Descriptors: []*rlcommon.RateLimitDescriptor{{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "hot", Value: "hot"}}}}},
	} {
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("%v: answered %v, want OK", req, resp.GetOverallCode())
		}
	}
}

// TestFloorWaitsForRedis: with -redis, each request costs the Redis one PING before its OK.
func TestFloorWaitsForRedis(t *testing.T) {
	addr := os.Getenv("SLUICE_REDIS_ADDR")
	if addr == "" {
		t.Skip("SLUICE_REDIS_ADDR not set (scripts/test.sh sets it)")
	}
	rc := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rc.Close()
	client := startFloor(t, rc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pings := func() int64 {
		info, err := rc.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_ping:calls="); ok {
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				return n
			}
		}
		return 0
	}
	before := pings()
	for range 10 {
		resp, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{})
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("%v %v", resp, err)
		}
	}
	if got := pings() - before; got < 10 {
		t.Errorf("10 requests made %d PINGs, want 10 (others' may add)", got)
	}
}

// startFloor serves the floor (waiting for redis when non-nil) on a loopback port for the
// test and returns a client of it.
func startFloor(t *testing.T, redis *goredis.Client) rlsv3.RateLimitServiceClient {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(redis)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}
