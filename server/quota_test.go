package server_test

import (
	"context"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/server"
)

// TestQuotaServiceReloadAndStop: RLQS is served on the RLS port; a reload changes a
// bucket's limit for the next report; a graceful stop expires the stream's assignment (TTL
// 0) and ends it, and Serve returns.
func TestQuotaServiceReloadAndStop(t *testing.T) {
	dir := t.TempDir()
	rules := func(limit string) string {
		return "domain: q\nquota_buckets:\n  - bucket_id: {name: api}\n    requests_per_unit: " + limit + "\n    unit: second\n"
	}
	writeFile(t, dir, "rules.yaml", rules("100"))
	h := start(t, "", func(c *server.Config) { c.RulesPath = dir; c.Quota.AbandonAfter = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(h.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	report := func(first bool) *rlqspb.RateLimitQuotaResponse {
		t.Helper()
		m := &rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqspb.BucketId{Bucket: map[string]string{"name": "api"}}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 500}}}
		if first {
			m.Domain = "q"
		}
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tokens := func(r *rlqspb.RateLimitQuotaResponse) uint32 {
		return r.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket().GetTokensPerFill().GetValue()
	}
	if got := tokens(report(true)); got != 100 {
		t.Fatalf("share %d, want 100", got)
	}
	writeFile(t, dir, "rules.yaml", rules("40"))
	if changed, err := h.srv.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if got := tokens(report(false)); got != 40 {
		t.Fatalf("after reload: share %d, want 40", got)
	}

	go h.stop()
	r, err := st.Recv()
	if err != nil {
		t.Fatalf("no expiry before the stop: %v", err)
	}
	q := r.GetBucketAction()[0].GetQuotaAssignmentAction()
	if q.GetAssignmentTimeToLive().AsDuration() != 0 || tokens(r) != 40 {
		t.Fatalf("stop sent %v, want the assignment with TTL 0", r)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream ended with %v, want Unavailable", err)
	}
}
