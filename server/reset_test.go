package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/connectlimit"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// resetAlgorithms are the algorithms the property of TestOverLimitResetPositive runs over.
var resetAlgorithms = []string{"fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket", "gcra"}

// resetLimit and resetPeriod are the rule of every door in TestOverLimitResetPositive: issue
// 30's "hits 3 on a 2/hour descriptor" was answered OVER_LIMIT with reset 0.
const (
	resetLimit  = 2
	resetPeriod = time.Hour
)

// resetHits are the costs asked after a first request of resetPrior units: from 1 to far
// above the limit.
var (
	resetHits  = []int64{1, 2, 3, 4, 20, 1 << 20}
	resetPrior = []int64{0, 1, 2}
)

// overReset is one denial a door answered: its reset (the wait it tells the client) and
// whether the request can never be allowed (its cost exceeds the capacity).
type overReset struct {
	door  string
	reset time.Duration
	never bool
}

// check fails unless the reset is positive and bounded: at most two periods (a sliding window
// needs up to two to drain, plus a second of rounding), at most the period (and a second) when
// the request can never be allowed.
func (o overReset) check(t *testing.T, what string) {
	t.Helper()
	bound := 2*resetPeriod + time.Second
	if o.never {
		bound = resetPeriod + time.Second
	}
	if o.reset <= 0 || o.reset > bound {
		t.Errorf("%s, %s: an over-limit answer with reset %v, want 0 < reset <= %v", o.door, what, o.reset, bound)
	}
}

// TestOverLimitResetPositive is issue 30's property: every over-limit answer of every door
// tells a positive reset, so that a client that honours it does not retry at once; a request
// that can never fit is told the time until its key's state is empty, at most the period.
// Over every algorithm, a first request of 0 to 2 units, then costs from 1 to far above the
// limit, through RLS gRPC (duration_until_reset and the RateLimit-Reset response header),
// /json, /v1/allow (both forms), the httplimit middleware (t, X-RateLimit-Reset,
// Retry-After), the grpclimit interceptor (RetryInfo, x-ratelimit-reset), the connectlimit
// interceptor (RetryInfo, Retry-After, t, X-RateLimit-Reset) and sluice proxy (t, Retry-After;
// its requests cost 1, so it is asked up to past the limit).
func TestOverLimitResetPositive(t *testing.T) {
	var rules strings.Builder
	rules.WriteString("domain: reset\ndescriptors:\n")
	for _, alg := range resetAlgorithms {
		fmt.Fprintf(&rules, "  - key: %s\n    rate_limit: {unit: hour, requests_per_unit: %d, algorithm: %s}\n", alg, resetLimit, alg)
	}
	h := start(t, rules.String(), func(c *server.Config) { c.ResponseHeaders = true })
	mw := resetMiddleware(t)
	gl := resetInterceptor(t)
	cl := resetConnect(t)
	denials := 0
	for _, alg := range resetAlgorithms {
		for _, prior := range resetPrior {
			for _, hits := range resetHits {
				what := fmt.Sprintf("%s, %d then %d units", alg, prior, hits)
				key := fmt.Sprintf("%s-%d-%d", alg, prior, hits)
				never := hits > resetLimit
				var over []overReset
				for _, n := range []int64{prior, hits} {
					if n == 0 {
						continue
					}
					over = over[:0]
					over = append(over, resetRLS(t, h, alg, key, n, never)...)
					over = append(over, resetJSON(t, h, alg, key+"-json", n, never)...)
					over = append(over, resetAllowDescriptors(t, h, alg, key+"-allow", n, never)...)
					over = append(over, resetAllowKey(t, h, alg, key+"-key", n, never)...)
					over = append(over, resetHTTPLimit(t, mw, alg, key, n, never)...)
					over = append(over, gl.call(t, alg, key, n, never)...)
					over = append(over, cl(t, alg, key, n, never)...)
				}
				for _, o := range over {
					o.check(t, what)
					denials++
				}
			}
		}
	}
	denials += resetProxy(t)
	t.Logf("%d over-limit answers checked over %d algorithms, 8 doors", denials, len(resetAlgorithms))
	if denials < len(resetAlgorithms)*len(resetPrior)*6 {
		t.Errorf("%d over-limit answers checked: the scenarios denied too little to test the property", denials)
	}
}

// resetRLS asks RLS gRPC for n units of alg's descriptor key.
func resetRLS(t *testing.T, h *harness, alg, key string, n int64, never bool) []overReset {
	t.Helper()
	d := desc(alg, key)
	d.HitsAddend = wrapperspb.UInt64(uint64(n))
	resp, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "reset", Descriptors: []*rlcommon.RateLimitDescriptor{d}})
	if err != nil {
		t.Fatal(err)
	}
	st := resp.Statuses[0]
	if st.Code != rlsv3.RateLimitResponse_OVER_LIMIT {
		return nil
	}
	out := []overReset{{"RLS duration_until_reset", st.DurationUntilReset.AsDuration(), never}}
	for _, hv := range resp.ResponseHeadersToAdd {
		if hv.GetKey() == server.DefaultResponseHeaderNames[2] {
			s, _ := strconv.Atoi(hv.GetValue())
			out = append(out, overReset{"RLS " + hv.GetKey() + " header", time.Duration(s) * time.Second, never})
		}
	}
	return out
}

// resetJSON asks /json, the peer's JSON API.
func resetJSON(t *testing.T, h *harness, alg, key string, n int64, never bool) []overReset {
	t.Helper()
	code, body := h.post(t, "/json", fmt.Sprintf(`{"domain":"reset","descriptors":[{"entries":[{"key":%q,"value":%q}],"hits_addend":%d}]}`, alg, key, n))
	if code == http.StatusOK {
		return nil
	}
	var resp rlsv3.RateLimitResponse
	if err := protojson.Unmarshal([]byte(body), &resp); err != nil || code != http.StatusTooManyRequests {
		t.Fatalf("/json: %d %s: %v", code, body, err)
	}
	return []overReset{{"/json durationUntilReset", resp.Statuses[0].DurationUntilReset.AsDuration(), never}}
}

// resetAllowDescriptors asks /v1/allow's descriptors form.
func resetAllowDescriptors(t *testing.T, h *harness, alg, key string, n int64, never bool) []overReset {
	t.Helper()
	_, body := h.post(t, "/v1/allow", fmt.Sprintf(`{"domain":"reset","descriptors":[{"entries":[{"key":%q,"value":%q}]}],"hits_addend":%d}`, alg, key, n))
	var resp server.AllowResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil || len(resp.Descriptors) != 1 {
		t.Fatalf("/v1/allow: %s: %v", body, err)
	}
	if resp.Allowed {
		return nil
	}
	return []overReset{{"/v1/allow descriptors reset_after_ms", time.Duration(resp.ResetAfterMs) * time.Millisecond, never},
		{"/v1/allow descriptors[0].reset_after_ms", time.Duration(resp.Descriptors[0].ResetAfterMs) * time.Millisecond, never}}
}

// resetAllowKey asks /v1/allow's key form, the rule in the request.
func resetAllowKey(t *testing.T, h *harness, alg, key string, n int64, never bool) []overReset {
	t.Helper()
	_, body := h.post(t, "/v1/allow", fmt.Sprintf(`{"key":%q,"rule":{"algorithm":%q,"limit":%d,"period":%q},"n":%d}`, key, alg, resetLimit, resetPeriod, n))
	var resp server.AllowResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("/v1/allow: %s: %v", body, err)
	}
	if resp.Allowed {
		return nil
	}
	return []overReset{{"/v1/allow key reset_after_ms", time.Duration(resp.ResetAfterMs) * time.Millisecond, never}}
}

// resetRule is the rule of alg at resetLimit per resetPeriod.
func resetRule(t *testing.T, alg string) sluice.Rule {
	t.Helper()
	a, err := sluice.ParseAlgorithm(alg)
	if err != nil {
		t.Fatal(err)
	}
	return sluice.Rule{Algorithm: a, Limit: resetLimit, Period: resetPeriod}
}

// resetMiddleware is an httplimit middleware with one limit per algorithm, keyed by
// X-Key-<algorithm> (absent: the limit does not apply), costing X-Cost, over a memory store
// on a manual clock.
func resetMiddleware(t *testing.T) http.Handler {
	t.Helper()
	clock := sluicetest.NewManualClock(t0)
	mem, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	var limits []httplimit.Limit
	for _, alg := range resetAlgorithms {
		limits = append(limits, httplimit.Limit{Name: alg, Rule: resetRule(t, alg), Key: httplimit.KeyHeader("X-Key-" + alg)})
	}
	mw, err := httplimit.New(sluice.New(mem), httplimit.WithLimits(limits...), httplimit.WithCost(func(r *http.Request) int64 {
		n, _ := strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
		return n
	}))
	if err != nil {
		t.Fatal(err)
	}
	return mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
}

var rateLimitT = regexp.MustCompile(`;t=(\d+)`)

// resetHTTPLimit asks the middleware for n units of alg's key.
func resetHTTPLimit(t *testing.T, mw http.Handler, alg, key string, n int64, never bool) []overReset {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Key-"+alg, key)
	r.Header.Set("X-Cost", strconv.FormatInt(n, 10))
	w := httptest.NewRecorder()
	mw.ServeHTTP(w, r)
	now := time.Now() // X-RateLimit-Reset is a Unix time of the real clock, read after the door's (see httpResets)
	if w.Code != http.StatusTooManyRequests {
		return nil
	}
	return httpResets(t, "httplimit", w.Result(), now, never)
}

// httpResets are the resets of a 429: Retry-After, the RateLimit header's t and, when sent,
// X-RateLimit-Reset (a Unix time) from now (zero: not checked), the real time read just after
// the door answered: the door read it earlier, so on a loaded machine its second may be an
// earlier one than now's, and from a time read before the call the reset would look up to
// that much longer (once 1h0m2s for an hour's window). These rules' resets are minutes at
// least, far longer than a call, so from now they stay positive.
func httpResets(t *testing.T, door string, resp *http.Response, now time.Time, never bool) []overReset {
	t.Helper()
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	out := []overReset{{door + " Retry-After", time.Duration(ra) * time.Second, never}}
	m := rateLimitT.FindStringSubmatch(resp.Header.Get("RateLimit"))
	if m == nil {
		t.Fatalf("%s: RateLimit %q, want a t", door, resp.Header.Get("RateLimit"))
	}
	s, _ := strconv.Atoi(m[1])
	out = append(out, overReset{door + " RateLimit t", time.Duration(s) * time.Second, never})
	if x := resp.Header.Get("X-RateLimit-Reset"); x != "" && !now.IsZero() {
		unix, _ := strconv.ParseInt(x, 10, 64)
		out = append(out, overReset{door + " X-RateLimit-Reset", time.Unix(unix, 0).Sub(now.Truncate(time.Second)), never})
	}
	return out
}

// resetGRPC is a gRPC server (the health service) behind a grpclimit interceptor with one
// route per algorithm, keyed by x-key metadata and costing x-cost.
type resetGRPC struct{ conn *grpc.ClientConn }

func resetInterceptor(t *testing.T) resetGRPC {
	t.Helper()
	mem, err := memory.New(memory.WithClock(sluicetest.NewManualClock(t0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	var limits []grpclimit.Limit
	for _, alg := range resetAlgorithms {
		limits = append(limits, grpclimit.Limit{Name: alg, Rule: resetRule(t, alg), Key: grpclimit.KeyMetadata("x-key-" + alg)})
	}
	in, err := grpclimit.New(sluice.New(mem), []grpclimit.Route{{Method: "", Limits: limits}}, grpclimit.WithCost(func(ctx context.Context, _ string, _ any) int64 {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("x-cost"); len(v) == 1 {
			n, _ := strconv.ParseInt(v[0], 10, 64)
			return n
		}
		return 1
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(in.Unary()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return resetGRPC{conn}
}

// call asks for n units of alg's key (the other limits see no key and do not apply).
func (g resetGRPC) call(t *testing.T, alg, key string, n int64, never bool) []overReset {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-key-"+alg, key, "x-cost", strconv.FormatInt(n, 10))
	var header metadata.MD
	_, err := healthpb.NewHealthClient(g.conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	if status.Code(err) != codes.ResourceExhausted {
		return nil
	}
	var out []overReset
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			out = append(out, overReset{"grpclimit RetryInfo", ri.GetRetryDelay().AsDuration(), never})
		}
	}
	if len(out) == 0 {
		out = append(out, overReset{"grpclimit RetryInfo (none)", 0, never})
	}
	if v := header.Get("x-ratelimit-reset"); len(v) == 1 {
		s, _ := strconv.Atoi(v[0])
		out = append(out, overReset{"grpclimit x-ratelimit-reset", time.Duration(s) * time.Second, never})
	}
	return out
}

// resetConnect serves a Connect handler behind a connectlimit interceptor with a limit per
// algorithm, keyed by the X-Key-<alg> header and costing X-Cost, and returns a call to it
// through connect's client (Connect's protocol): the resets of its refusal.
func resetConnect(t *testing.T) func(t *testing.T, alg, key string, n int64, never bool) []overReset {
	t.Helper()
	mem, err := memory.New(memory.WithClock(sluicetest.NewManualClock(t0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	var limits []connectlimit.Limit
	for _, alg := range resetAlgorithms {
		limits = append(limits, connectlimit.Limit{Name: alg, Rule: resetRule(t, alg), Key: connectlimit.KeyHeader("X-Key-" + alg)})
	}
	in, err := connectlimit.New(sluice.New(mem), []connectlimit.Route{{Limits: limits}}, connectlimit.WithCost(func(_ context.Context, c connectlimit.Call, _ any) int64 {
		n, _ := strconv.ParseInt(c.Header.Get("X-Cost"), 10, 64)
		return n
	}))
	if err != nil {
		t.Fatal(err)
	}
	const procedure = "/sluice.test.v1.Reset/Ping"
	srv := httptest.NewServer(connect.NewUnaryHandler(procedure, func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		return connect.NewResponse(&emptypb.Empty{}), nil
	}, connect.WithInterceptors(in)))
	t.Cleanup(srv.Close)
	client := connect.NewClient[emptypb.Empty, emptypb.Empty](srv.Client(), srv.URL+procedure)
	return func(t *testing.T, alg, key string, n int64, never bool) []overReset {
		t.Helper()
		req := connect.NewRequest(&emptypb.Empty{})
		req.Header().Set("X-Key-"+alg, key)
		req.Header().Set("X-Cost", strconv.FormatInt(n, 10))
		_, err := client.CallUnary(context.Background(), req)
		now := time.Now() // X-RateLimit-Reset is a Unix time of the real clock, read after the door's (see httpResets)
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
			return nil
		}
		out := httpResets(t, "connectlimit", &http.Response{Header: ce.Meta()}, now, never)
		for _, d := range ce.Details() {
			if v, _ := d.Value(); v != nil {
				if ri, ok := v.(*errdetails.RetryInfo); ok {
					return append(out, overReset{"connectlimit RetryInfo", ri.GetRetryDelay().AsDuration(), never})
				}
			}
		}
		return append(out, overReset{"connectlimit RetryInfo (none)", 0, never})
	}
}

// resetProxy runs sluice proxy with a limit per algorithm (and a block), asks each past its
// limit (a request costs 1), and checks every 429's resets; it returns how many it checked.
func resetProxy(t *testing.T) int {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(up.Close)
	var rules strings.Builder
	rules.WriteString("domain: edge\ndescriptors:\n")
	for _, alg := range resetAlgorithms {
		fmt.Fprintf(&rules, "  - key: %s\n    rate_limit: {unit: hour, requests_per_unit: %d, algorithm: %s}\n", alg, resetLimit, alg)
	}
	rules.WriteString("  - key: block\n    rate_limit: {unit: hour, requests_per_unit: 0}\nproxy:\n  rate_limits:\n")
	for _, alg := range append(resetAlgorithms, "block") {
		fmt.Fprintf(&rules, "    - actions: [{request_headers: {header_name: X-%s, descriptor_key: %s, skip_if_absent: true}}]\n", alg, alg)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := sluicetest.NewManualClock(t0)
	p, err := proxy.New(proxy.Config{Upstream: up.URL, Addr: "127.0.0.1:0", AdminAddr: "-", RulesPath: path, ReloadInterval: -1,
		StoreConfig: store.Config{Backend: store.Backend{Clock: clock}}, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	checked := 0
	for _, alg := range append(resetAlgorithms, "block") {
		for i := range resetLimit + 2 {
			req, _ := http.NewRequest(http.MethodGet, "http://"+p.Addr()+"/", nil)
			req.Header.Set("X-"+alg, "k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests {
				if i >= resetLimit || alg == "block" {
					t.Errorf("proxy %s: request %d: %d, want 429", alg, i, resp.StatusCode)
				}
				continue
			}
			for _, o := range httpResets(t, "proxy "+alg, resp, time.Time{}, alg == "block") {
				o.check(t, fmt.Sprintf("proxy, request %d", i))
				checked++
			}
		}
	}
	return checked
}
