package rlqs

import (
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/config"
)

// Strategy returns the RateLimitStrategy that hands a client share requests per period of
// rule: a token bucket filling share per period with share/limit of the fleet's burst (at
// least one token), requests_per_time_unit share per unit, or the rule's blanket rule. A zero
// share denies everything (DENY_ALL for a token bucket, 0 requests per unit otherwise). Every
// strategy passes the protocol's validation.
func Strategy(rule *config.QuotaRule, share int64) *typev3.RateLimitStrategy {
	switch rule.Strategy {
	case config.QuotaAllowAll:
		return blanket(typev3.RateLimitStrategy_ALLOW_ALL)
	case config.QuotaDenyAll:
		return blanket(typev3.RateLimitStrategy_DENY_ALL)
	case config.QuotaRequestsPerTimeUnit:
		return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_RequestsPerTimeUnit_{
			RequestsPerTimeUnit: &typev3.RateLimitStrategy_RequestsPerTimeUnit{
				RequestsPerTimeUnit: uint64(max(share, 0)), TimeUnit: typev3.RateLimitUnit(rule.Unit)}}}
	}
	if share <= 0 || rule.Share.Limit <= 0 {
		return blanket(typev3.RateLimitStrategy_DENY_ALL) // a token bucket must fill (tokens_per_fill > 0)
	}
	tokens := max(1, rule.Burst*share/rule.Share.Limit)
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens:     uint32(min(tokens, 1<<32-1)),
		TokensPerFill: wrapperspb.UInt32(uint32(min(share, 1<<32-1))),
		FillInterval:  durationpb.New(rule.Share.Period),
	}}}
}

func blanket(r typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: r}}
}

// assign builds the action that applies strategy to bucket for ttl.
func assign(bucket *rlqspb.BucketId, strategy *typev3.RateLimitStrategy, ttl time.Duration) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{BucketId: bucket,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(ttl), RateLimitStrategy: strategy}}}
}

// abandon builds the action that abandons bucket.
func abandon(bucket *rlqspb.BucketId) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{BucketId: bucket,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{
			AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}}}
}
