package connectlimit_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/connectlimit"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/memory"
)

// interceptorCases are the limits BenchmarkInterceptor and TestAllowedCallAllocations put on
// a unary call: none, then keyed by procedure, API key, client address, and two together.
func interceptorCases(b testing.TB) []struct {
	name   string
	limits []connectlimit.Limit
} {
	trusted, err := clientip.New([]string{"192.0.2.0/24"})
	if err != nil {
		b.Fatal(err)
	}
	rule := sluice.TokenBucket(1e9, time.Second, 1e9)
	limit := func(name string, key connectlimit.Key) connectlimit.Limit {
		return connectlimit.Limit{Name: name, Rule: rule, Key: key}
	}
	return []struct {
		name   string
		limits []connectlimit.Limit
	}{
		{"bare", nil},
		{"procedure", []connectlimit.Limit{limit("procedure", connectlimit.KeyProcedure())}},
		{"api_key", []connectlimit.Limit{limit("key", connectlimit.KeyHeader("X-API-Key"))}},
		{"peer_ip", []connectlimit.Limit{limit("ip", connectlimit.KeyIP(trusted, 64))}},
		{"peer_ip_and_api_key_procedure", []connectlimit.Limit{limit("ip", connectlimit.KeyIP(trusted, 64)),
			limit("key_procedure", connectlimit.Keys(connectlimit.KeyHeader("X-API-Key"), connectlimit.KeyProcedure()))}},
	}
}

// handlerConn is a handler's side of a call as connect gives it to an interceptor, from a
// client behind a trusted proxy (the peer 192.0.2.1 forwarding for 198.51.100.7).
type handlerConn struct {
	connect.StreamingHandlerConn // not called
	request, response            http.Header
}

func (c *handlerConn) Spec() connect.Spec {
	return connect.Spec{Procedure: "/bench.v1.BenchService/Call", StreamType: connect.StreamTypeServer}
}
func (c *handlerConn) Peer() connect.Peer {
	return connect.Peer{Addr: "192.0.2.1:1234", Protocol: connect.ProtocolConnect}
}
func (c *handlerConn) RequestHeader() http.Header   { return c.request }
func (c *handlerConn) ResponseHeader() http.Header  { return c.response }
func (c *handlerConn) ResponseTrailer() http.Header { return http.Header{} }

// handlerCall returns a call of a handler through in (its streaming path: the unary one reads
// the same, but its peer cannot be set from outside connect) and the conn it takes.
func handlerCall(in *connectlimit.Interceptor) (connect.StreamingHandlerFunc, *handlerConn) {
	conn := &handlerConn{request: http.Header{}, response: http.Header{}}
	conn.request.Set("X-API-Key", "tenant-0001")
	conn.request.Set("X-Forwarded-For", "198.51.100.7")
	return in.WrapStreamingHandler(func(context.Context, connect.StreamingHandlerConn) error { return nil }), conn
}

// BenchmarkInterceptor: what connectlimit's interceptor adds to a handler's call on the memory
// store, headers off, without the network and connect's own work.
func BenchmarkInterceptor(b *testing.B) {
	st, err := memory.New()
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, tc := range interceptorCases(b) {
		b.Run(tc.name, func(b *testing.B) {
			in, err := connectlimit.New(sluice.New(st), every(tc.limits...), connectlimit.WithHeaderStyle(httplimit.HeadersNone))
			if err != nil {
				b.Fatal(err)
			}
			call, conn := handlerCall(in)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := call(ctx, conn); err != nil {
					b.Fatal(err)
				}
			}
			if s := in.Stats(); s.Allowed.Load() == 0 && tc.limits != nil || s.Denied.Load()+s.StoreErrors.Load()+s.BadInput.Load() > 0 {
				b.Fatalf("not every call admitted and decided: allowed %d", s.Allowed.Load())
			}
		})
	}
}

// TestAllowedCallAllocations: on the memory store an admitted call costs connectlimit no
// allocation with the headers off, and httplimit's two header values with them.
func TestAllowedCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	st, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, style := range []httplimit.HeaderStyle{httplimit.HeadersNone, httplimit.HeadersBoth} {
		for _, tc := range interceptorCases(t) {
			in := mustNew(t, sluice.New(st), every(tc.limits...), connectlimit.WithHeaderStyle(style))
			call, conn := handlerCall(in)
			got := testing.AllocsPerRun(200, func() {
				clear(conn.response)
				_ = call(context.Background(), conn)
			})
			want := 0.0
			if style == httplimit.HeadersBoth && tc.limits != nil {
				want = 2
			}
			if got > want {
				t.Errorf("%v %s: %v allocations per admitted call, want at most %v", style, tc.name, got, want)
			}
		}
	}
}
