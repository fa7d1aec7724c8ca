package connectlimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/connectlimit"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestBudget: over Connect's protocol, a budget limit reserves a call's cost (WithCost) once
// its rate limits admit it and commits, when the handler returns, the cost it reports with
// Settle (the estimate when it reports none); a call whose cost does not fit a strict budget
// is refused with a QuotaFailure naming the budget and a RetryInfo until it frees; Settle
// outside a call is false. (grpclimit's TestBudget is the same over gRPC: the door is shared.)
func TestBudget(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	l := newMemory(t, clock)
	rule := sluice.FixedWindow(100, time.Minute)
	in := mustNew(t, l, every(connectlimit.Limit{Name: "tokens", Rule: rule, Budget: &sluice.Budget{Mode: sluice.Strict}}),
		connectlimit.WithCost(func(context.Context, connectlimit.Call, any) int64 { return 40 }))
	mux := http.NewServeMux()
	mux.Handle(pingProcedure, connect.NewUnaryHandler(pingProcedure, func(ctx context.Context, req *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		if v := req.Header().Get("X-Cost"); v != "" {
			n, _ := strconv.ParseInt(v, 10, 64)
			if !connectlimit.Settle(ctx, n) {
				t.Error("Settle: false in a call with a budget")
			}
		}
		return connect.NewResponse(&emptypb.Empty{}), nil
	}, connect.WithInterceptors(in)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	s := &server{url: srv.URL, client: srv.Client(), tr: transports[0]}
	for _, cost := range []string{"5", "", "30"} { // 5 charged of the 40 held; the 40 stand; 30: 75 used
		if _, err := s.ping(t, nil, "X-Cost", cost); err != nil {
			t.Fatalf("cost %q: %v", cost, err)
		}
	}
	if d, _ := l.Peek(context.Background(), "tokens:", rule); d.Remaining != 25 {
		t.Fatalf("remaining %d, want 25", d.Remaining)
	}
	_, err := s.ping(t, nil) // 40 do not fit the 25 left
	r := refusalOf(t, err)
	if r.code != connect.CodeResourceExhausted || r.quota == nil || len(r.quota.Violations) != 1 || r.quota.Violations[0].QuotaId != "tokens" ||
		r.retry == nil || r.retry.RetryDelay.AsDuration() <= 0 {
		t.Fatalf("over the budget: %+v", r)
	}
	if connectlimit.Settle(context.Background(), 1) {
		t.Fatal("Settle outside a call: true")
	}
}
