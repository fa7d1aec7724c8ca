package rlqs

import (
	"testing"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/config"
)

// FuzzReport (issue 16, item 10): any bytes as a usage report, once they decode, are either
// accepted or refused with InvalidArgument or ResourceExhausted (the status that ends only that
// stream), never a panic.
func FuzzReport(f *testing.F) {
	seed := &rlqspb.RateLimitQuotaUsageReports{Domain: "d", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId:           &rlqspb.BucketId{Bucket: map[string]string{"name": "a"}},
		TimeElapsed:        durationpb.New(1e9),
		NumRequestsAllowed: 10, NumRequestsDenied: 2,
	}}}
	b, err := proto.Marshal(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte{})
	rules := loadRules(f)
	s := New(Config{Rules: func() *config.Config { return rules }})
	f.Fuzz(func(t *testing.T, data []byte) {
		var msg rlqspb.RateLimitQuotaUsageReports
		if proto.Unmarshal(data, &msg) != nil {
			return
		}
		if _, err := s.validate(&msg); err != nil {
			if c := status.Code(err); c != codes.InvalidArgument && c != codes.ResourceExhausted {
				t.Fatalf("refused with %v: %v", c, err)
			}
		}
	})
}
