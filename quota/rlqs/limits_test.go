package rlqs

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestCancelledStreamIsNoStateError (issue 22, item 6): a report cut short because its
// stream ended (its context cancelled) is not a quota-state error; a store that fails is.
func TestCancelledStreamIsNoStateError(t *testing.T) {
	rc := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { _ = rc.Close() })
	obs := &countingObserver{}
	rules := loadRules(t)
	prefix := "test:rlqs-cancel:" + time.Now().Format("150405.000000") + ":"
	svc := New(Config{Rules: func() *config.Config { return rules }, Ledger: NewRedisLedger(rc, prefix), Observer: obs})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client went away
	if _, err := newStream(svc, "c").handle(ctx, reportOf(3, 1)); err != nil {
		t.Fatal(err)
	}
	if n := obs.errors.Load(); n != 0 {
		t.Fatalf("%d state errors for a cancelled stream, want 0", n)
	}
	down := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	svc = New(Config{Rules: func() *config.Config { return rules }, Ledger: NewRedisLedger(down, prefix), Observer: obs})
	if _, err := newStream(svc, "c").handle(context.Background(), reportOf(1, 1)); err != nil {
		t.Fatal(err)
	}
	if n := obs.errors.Load(); n != 1 {
		t.Fatalf("%d state errors with the store down, want 1", n)
	}
}

// TestBucketIDsStoredOnce (issue 22, item 5): streams reporting the same bucket ids share
// one copy of each; the ids' memory budget refuses a report past it with
// RESOURCE_EXHAUSTED, and what streams give back on leaving is free again.
func TestBucketIDsStoredOnce(t *testing.T) {
	clock := sluicetest.NewManualClock(time.Unix(1e9, 0))
	rules := loadRules(t)
	svc := New(Config{Rules: func() *config.Config { return rules }, Clock: clock, MaxBucketMemory: 1 << 20})
	ctx := context.Background()
	sts := streams(svc, 10)
	for _, st := range sts {
		if _, err := st.handle(ctx, reportOf(50, 1)); err != nil {
			t.Fatal(err)
		}
	}
	ids, used := svc.ids.size()
	if ids != 50 {
		t.Fatalf("%d ids held for 10 streams × the same 50, want 50", ids)
	}
	if want := int64(500*subCost + 50*(idCostFixed+idCostPerByte*32)); used > want {
		t.Fatalf("%d bytes charged, want at most %d", used, want)
	}
	// Past the budget: 1 MiB / 1 KiB subscriptions.
	big := streams(svc, 1)[0]
	_, err := big.handle(ctx, reportOf(1000, 1))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "memory for bucket ids") {
		t.Fatalf("past the budget: %v, want RESOURCE_EXHAUSTED", err)
	}
	big.leaveAll()
	for _, st := range sts {
		st.leaveAll()
	}
	if ids, used := svc.ids.size(); ids != 0 || used != 0 {
		t.Fatalf("after every stream left: %d ids, %d bytes", ids, used)
	}
}

// TestBucketMemoryBudget (issue 22, item 5): streams subscribing to distinct 1 KiB bucket
// ids until the budget refuses them hold a live heap within the budget (the costs charged
// cover what is held), and the figures per id and per subscription are logged for
// docs/BENCHMARKS.md.
func TestBucketMemoryBudget(t *testing.T) {
	const budget = 32 << 20
	clock := sluicetest.NewManualClock(time.Unix(1e9, 0))
	rules := loadRules(t)
	svc := New(Config{Rules: func() *config.Config { return rules }, Clock: clock, MaxBucketMemory: budget, MaxBuckets: 1000})
	ctx := context.Background()
	pad := strings.Repeat("v", 1000)
	before := testenv.LiveHeap()
	var held []*stream
	subs := 0
	for i := 0; ; i++ {
		st := streams(svc, 1)[0]
		st.id = fmt.Sprint("s", i)
		m := &rlqspb.RateLimitQuotaUsageReports{Domain: "d"}
		for j := 0; j < 100; j++ {
			m.BucketQuotaUsages = append(m.BucketQuotaUsages, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
				BucketId:    &rlqspb.BucketId{Bucket: map[string]string{"name": fmt.Sprint(i, "-", j, pad)}},
				TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 1})
		}
		if _, err := st.handle(ctx, m); err != nil {
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatal(err)
			}
			break
		}
		held = append(held, st)
		subs += 100
	}
	grown := int64(testenv.LiveHeap()) - int64(before)
	ids, used := svc.ids.size()
	t.Logf("%d distinct 1 KiB ids on %d streams: %d bytes charged, live heap +%.1f MiB (%.0f bytes per id with its subscription)",
		ids, len(held), used, testenv.MiB(uint64(max(grown, 0))), float64(grown)/float64(subs))
	if grown > budget*5/4 {
		t.Fatalf("live heap grew by %.1f MiB for a budget of %.0f MiB", testenv.MiB(uint64(grown)), testenv.MiB(budget))
	}
	runtime.KeepAlive(held)
}
