package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestBudget: a budget limit reserves the call's cost (WithCost) once its rate limits admit
// it and commits, after the handler, the cost the handler reports with Settle (the estimate
// when it reports none); a call whose cost does not fit a strict budget is refused with a
// QuotaFailure naming the budget and a RetryInfo until it frees.
func TestBudget(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	l := newMemory(t, clock)
	rule := sluice.FixedWindow(100, time.Minute)
	in := mustNew(t, l, every(grpclimit.Limit{Name: "tokens", Rule: rule, Budget: &sluice.Budget{Mode: sluice.Strict}}),
		grpclimit.WithCost(func(context.Context, string, any) int64 { return 40 }))
	unary := in.Unary()
	call := func(report int64) error {
		_, err := unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: checkMethod}, func(ctx context.Context, _ any) (any, error) {
			if report >= 0 && !grpclimit.Settle(ctx, report) {
				t.Error("Settle: false in a call with a budget")
			}
			return nil, nil
		})
		return err
	}
	if err := call(5); err != nil { // 40 held, 5 charged
		t.Fatal(err)
	}
	if err := call(-1); err != nil { // nothing reported: the 40 stand
		t.Fatal(err)
	}
	if err := call(30); err != nil { // 30: 75 used
		t.Fatal(err)
	}
	if d, _ := l.Peek(context.Background(), "tokens:", rule); d.Remaining != 25 {
		t.Fatalf("remaining %d, want 25", d.Remaining)
	}
	err := call(0) // 40 do not fit the 25 left
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("over the budget: %v", err)
	}
	var named, retry bool
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.QuotaFailure:
			named = len(d.Violations) == 1 && d.Violations[0].QuotaId == "tokens"
		case *errdetails.RetryInfo:
			retry = d.RetryDelay.AsDuration() > 0
		}
	}
	if !named || !retry {
		t.Fatalf("the refusal's details %v: the budget named %v, a RetryInfo %v", st.Details(), named, retry)
	}
	if grpclimit.Settle(context.Background(), 1) {
		t.Fatal("Settle outside a call: true")
	}
}
