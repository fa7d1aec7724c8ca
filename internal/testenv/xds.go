package testenv

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	xdsserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// XDSServer is an xDS management server for tests: go-control-plane's State-of-the-World
// server (pkg/server/v3) over its snapshot cache, as Envoy Gateway's controller serves
// RateLimitConfig resources, recording what clients send it.
type XDSServer struct {
	Addr   string
	GRPC   *grpc.Server
	cache  cache.SnapshotCache
	nodeID string

	mu       sync.Mutex
	requests []*discovery.DiscoveryRequest
	opened   int
	md       metadata.MD
}

// StartXDS serves on addr ("127.0.0.1:0": any port) the snapshots of node nodeID, over TLS
// when tc is not nil, until the test ends.
func StartXDS(t testing.TB, addr, nodeID string, tc *tls.Config) *XDSServer {
	t.Helper()
	s := &XDSServer{cache: cache.NewSnapshotCache(true, cache.IDHash{}, nil), nodeID: nodeID}
	cb := xdsserver.CallbackFuncs{
		StreamOpenFunc: func(ctx context.Context, _ int64, _ string) error {
			md, _ := metadata.FromIncomingContext(ctx)
			s.mu.Lock()
			s.opened++
			s.md = md
			s.mu.Unlock()
			return nil
		},
		StreamRequestFunc: func(_ int64, r *discovery.DiscoveryRequest) error {
			s.mu.Lock()
			s.requests = append(s.requests, r)
			s.mu.Unlock()
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := xdsserver.NewServer(ctx, s.cache, cb)
	var opts []grpc.ServerOption
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	s.GRPC = grpc.NewServer(opts...)
	discovery.RegisterAggregatedDiscoveryServiceServer(s.GRPC, srv)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = lis.Addr().String()
	go func() { _ = s.GRPC.Serve(lis) }()
	t.Cleanup(func() { cancel(); s.GRPC.Stop() })
	return s
}

// Set makes res the node's snapshot, at version.
func (s *XDSServer) Set(t testing.TB, version string, res ...*rlsconf.RateLimitConfig) {
	t.Helper()
	rs := make([]types.Resource, len(res))
	for i, r := range res {
		rs[i] = r
	}
	snap, err := cache.NewSnapshot(version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: rs})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cache.SetSnapshot(context.Background(), s.nodeID, snap); err != nil {
		t.Fatal(err)
	}
}

// Acked reports whether a client ACKed version (a request with that version, a response
// nonce and no error).
func (s *XDSServer) Acked(version string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.requests {
		if r.GetErrorDetail() == nil && r.GetVersionInfo() == version && r.GetResponseNonce() != "" {
			return true
		}
	}
	return false
}

// Nacks returns the error messages of the NACKs received.
func (s *XDSServer) Nacks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.requests {
		if d := r.GetErrorDetail(); d != nil {
			out = append(out, d.GetMessage())
		}
	}
	return out
}

// Streams is the number of streams opened.
func (s *XDSServer) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened
}

// FirstRequest is the first request received, nil before.
func (s *XDSServer) FirstRequest() *discovery.DiscoveryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return nil
	}
	return s.requests[0]
}

// Metadata is the gRPC metadata of the last stream opened.
func (s *XDSServer) Metadata() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.md
}
