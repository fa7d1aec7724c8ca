package connectlimit_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/bradfitz/gomemcache/memcache"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/connectlimit"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memcached"
	"github.com/sluicehq/sluice/store/redis"
)

// uniqueName returns a limit name no other run uses: the shared servers keep state between
// runs.
func uniqueName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "connectlimit-test-" + hex.EncodeToString(b)
}

// TestSharedStores: on the real Redis and memcached of scripts/test.sh, 200 concurrent calls
// over HTTP/2 against a limit of 50 admit exactly 50, and two interceptors (two instances of a
// service) share one budget: the second admits none.
func TestSharedStores(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) sluice.Store
	}{
		{"redis", func(t *testing.T) sluice.Store {
			st, err := redis.NewFromURL("redis://" + testenv.RedisAddr(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"memcached", func(t *testing.T) sluice.Store {
			st, err := memcached.New(memcache.New(testenv.MemcachedAddr(t)))
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := sluice.New(tc.store(t))
			limit := connectlimit.Limit{Name: uniqueName(), Rule: sluice.FixedWindow(50, time.Hour), Key: connectlimit.KeyProcedure()}
			in := mustNew(t, l, every(limit))
			exact(t, serve(t, in, transports[1]), in, 50)
			other := mustNew(t, l, every(limit))
			s := serve(t, other, transports[0])
			if _, err := s.ping(t, nil); err == nil || s.calls.Load() != 0 {
				t.Errorf("a second instance admitted a call past the shared budget: %v", err)
			}
		})
	}
}

// TestOneBudgetWithGRPCLimit: a limit of one name keys calls alike in grpclimit and
// connectlimit (the limit's name, ':', the key: grpclimit.KeyMetadata's value is KeyHeader's),
// so on one store a gRPC server and a Connect one share a client's budget.
func TestOneBudgetWithGRPCLimit(t *testing.T) {
	l := newMemory(t, sluicetest.NewManualClock(t0))
	rule := sluice.FixedWindow(2, time.Hour)
	g, err := grpclimit.New(l, []grpclimit.Route{{Limits: []grpclimit.Limit{{Name: "per-key", Rule: rule, Key: grpclimit.KeyMetadata("x-api-key")}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "alice"))
	handler := func(context.Context, any) (any, error) { return nil, nil }
	if _, err := g.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: pingProcedure}, handler); err != nil {
		t.Fatalf("grpclimit's call: %v", err)
	}
	s := serve(t, mustNew(t, l, every(connectlimit.Limit{Name: "per-key", Rule: rule, Key: connectlimit.KeyHeader("X-API-Key")})), transports[0])
	if _, err := s.ping(t, nil, "X-API-Key", "alice"); err != nil {
		t.Fatalf("connectlimit's call: %v", err)
	}
	if _, err := s.ping(t, nil, "X-API-Key", "alice"); refusalOf(t, err).code != connect.CodeResourceExhausted {
		t.Errorf("third call of the budget of 2: %v, want ResourceExhausted", err)
	}
	if _, err := g.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: pingProcedure}, handler); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("grpclimit after connectlimit's call: %v, want ResourceExhausted", err)
	}
}
