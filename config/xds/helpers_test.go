package xds_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	xdsserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// xdsServer is a go-control-plane State-of-the-World server (pkg/server/v3 over a snapshot
// cache), recording what clients send it.
type xdsServer struct {
	addr   string
	cache  cache.SnapshotCache
	grpc   *grpc.Server
	nodeID string

	mu       sync.Mutex
	requests []*discovery.DiscoveryRequest
	opened   int
	md       metadata.MD
}

// startXDS serves on addr ("127.0.0.1:0" for any port) with TLS creds (nil: plain text).
func startXDS(t *testing.T, addr, nodeID string, tc *tls.Config) *xdsServer {
	t.Helper()
	s := &xdsServer{cache: cache.NewSnapshotCache(true, cache.IDHash{}, nil), nodeID: nodeID}
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
	s.grpc = grpc.NewServer(opts...)
	discovery.RegisterAggregatedDiscoveryServiceServer(s.grpc, srv)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	go func() { _ = s.grpc.Serve(lis) }()
	t.Cleanup(func() { cancel(); s.grpc.Stop() })
	return s
}

// set makes res the snapshot of the node at version.
func (s *xdsServer) set(t *testing.T, version string, res ...*rlsconf.RateLimitConfig) {
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

// acked reports whether a client ACKed version (a request with that version, a response
// nonce and no error).
func (s *xdsServer) acked(version string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.requests {
		if r.GetErrorDetail() == nil && r.GetVersionInfo() == version && r.GetResponseNonce() != "" {
			return true
		}
	}
	return false
}

// nacks returns the error messages of the NACKs received.
func (s *xdsServer) nacks() []string {
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

func (s *xdsServer) streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened
}

func (s *xdsServer) firstRequest() *discovery.DiscoveryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return nil
	}
	return s.requests[0]
}

// eventually polls cond every 5 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// newEngine is an engine over a memory store on a manual clock at t0.
func newEngine(t *testing.T, cfg rls.Config) *rls.Engine {
	t.Helper()
	mem, err := memory.New(memory.WithClock(sluicetest.NewManualClock(t0)), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	cfg.Store = mem
	cfg.ReloadInterval = -1
	e, err := rls.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// runEngine runs e (its RulesSource) until the test ends.
func runEngine(t *testing.T, e *rls.Engine) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// answer decides one request of alternating keys and values and summarises the answer (or
// the error).
func answer(e *rls.Engine, domain string, kv ...string) string {
	req := &rls.Request{Domain: domain, Descriptors: []rls.Descriptor{{}}}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Descriptors[0].Entries = append(req.Descriptors[0].Entries, rls.Entry{Key: kv[i], Value: kv[i+1]})
	}
	var ans rls.Answer
	if err := e.Decide(context.Background(), req, &ans); err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	b.WriteString(ans.Code.String())
	for _, v := range ans.Verdicts {
		key := ""
		if v.Limit != nil {
			key = v.Limit.FullKey
		}
		fmt.Fprintf(&b, " [%s %s remaining=%d reset=%v]", key, v.Code, v.Remaining, v.Reset)
	}
	return b.String()
}

// dump is the rules as envoyproxy/ratelimit's config.Dump writes them (one line per limit),
// sorted: its provider tests compare these lines.
func dump(c *config.Config) []string {
	var lines []string
	for _, l := range c.Limits() {
		unit := strings.ToUpper(l.Unit.String())
		if l.Unlimited {
			unit = "UNKNOWN"
		}
		lines = append(lines, fmt.Sprintf("%s: unit=%s requests_per_unit=%d, shadow_mode: %t, quota_mode: %t",
			l.FullKey, unit, l.RequestsPerUnit, l.ShadowMode, l.QuotaMode))
	}
	return lines
}
