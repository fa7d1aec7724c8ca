package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/testenv"
)

// aiGatewayManifest is Envoy AI Gateway v1.1.0's QuotaPolicy end-to-end set-up, verbatim: its
// rate-limit Deployment (envoy-ai-gateway-ratelimit) and the QuotaPolicy whose rules its
// controller serves over xDS.
const aiGatewayManifest = "testdata/ai-gateway/backend_quota_ratelimit.yaml"

// aiQuotaPolicy is the part of the manifest's QuotaPolicy the rules are made of.
type aiQuotaPolicy struct {
	Metadata struct{ Namespace string }
	Spec     struct {
		TargetRefs     []struct{ Name string } `yaml:"targetRefs"`
		PerModelQuotas []struct {
			ModelName string `yaml:"modelName"`
			Quota     struct {
				DefaultBucket struct {
					Limit    uint32
					Duration string
				} `yaml:"defaultBucket"`
			}
		} `yaml:"perModelQuotas"`
	}
}

// aiGatewayRules is the RateLimitConfig AI Gateway's controller serves for policy, as its
// internal/ratelimit/translator/translator.go (v1.1.0) builds it for a per-model quota with a
// default bucket only: domain ai-gateway-quota; backend_name "<namespace>/<backend>"; under
// it model_name_override "<model>" with the bucket's limit (quotaValueToPolicy: "1h" is HOUR)
// and quota_mode true — which go-control-plane's ratelimit module v0.1.0, Sluice's, cannot
// carry (no such field): a lone quota-mode descriptor over its limit denies all the same.
func aiGatewayRules(t *testing.T, policy aiQuotaPolicy) (*rlsconf.RateLimitConfig, string, string, uint32) {
	t.Helper()
	q := policy.Spec.PerModelQuotas[0]
	units := map[string]rlsconf.RateLimitUnit{"1s": rlsconf.RateLimitUnit_SECOND, "1m": rlsconf.RateLimitUnit_MINUTE,
		"1h": rlsconf.RateLimitUnit_HOUR, "1d": rlsconf.RateLimitUnit_DAY}
	unit, ok := units[q.Quota.DefaultBucket.Duration]
	if !ok {
		t.Fatalf("duration %q", q.Quota.DefaultBucket.Duration)
	}
	backend := policy.Metadata.Namespace + "/" + policy.Spec.TargetRefs[0].Name
	return &rlsconf.RateLimitConfig{Name: "ai-gateway-quota", Domain: "ai-gateway-quota", Descriptors: []*rlsconf.RateLimitDescriptor{{
		Key: "backend_name", Value: backend, Descriptors: []*rlsconf.RateLimitDescriptor{{
			Key: "model_name_override", Value: q.ModelName,
			RateLimit: &rlsconf.RateLimitPolicy{RequestsPerUnit: q.Quota.DefaultBucket.Limit, Unit: unit}}}}}}, backend, q.ModelName, q.Quota.DefaultBucket.Limit
}

// aiRequest is what Envoy sends for a chat completion under the QuotaPolicy
// (internal/extensionserver/quota_ratelimit.go, v1.1.0): at request time the backend and the
// model as generic keys and no hits_addend (a count of 1); when the stream ends
// (apply_on_stream_done) the same entries from the dynamic metadata, with hits_addend the
// metadata's quota_cost (the tokens). zeroCost is Envoy Gateway's cost.request.number 0 of AI
// Gateway's token_ratelimit example instead: a check that consumes nothing.
func aiRequest(backend, model string, tokens uint64, streamDone, zeroCost bool) *rlsv3.RateLimitRequest {
	d := &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{
		{Key: "backend_name", Value: backend}, {Key: "model_name_override", Value: model}}}
	switch {
	case streamDone:
		d.HitsAddend = wrapperspb.UInt64(tokens)
	case zeroCost:
		d.HitsAddend = wrapperspb.UInt64(0)
	}
	return &rlsv3.RateLimitRequest{Domain: "ai-gateway-quota", Descriptors: []*rlcommon.RateLimitDescriptor{d}}
}

// TestAIGatewayTokenLimits is issue 30's "Done when" for Envoy AI Gateway: sluice serve as
// its own rate-limit Deployment runs it (/bin/ratelimit with the argument it passes,
// --quotaRateLimitServiceAddr, which envoyproxy/ratelimit ignores and which stopped sluice
// with exit 2; its environment verbatim but for the cluster's addresses and listeners on
// 127.0.0.1:0), the QuotaPolicy's rules over plain xDS as its controller serves them, passes
// its token-limit flow: a request checked, its tokens charged when the stream ends (more than
// the whole budget: they are served already), the next request denied with a positive reset
// — AI Gateway's e2e test's 200 then 429 — and, checked at zero cost as in its
// token_ratelimit example, usage charged at stream end until the budget is spent, then the
// zero-cost check denied.
func TestAIGatewayTokenLimits(t *testing.T) {
	c := deploymentContainer(t, aiGatewayManifest, "envoy-ai-gateway-ratelimit")
	var policy aiQuotaPolicy
	manifestDoc(t, aiGatewayManifest, "QuotaPolicy", "envoy-ai-gateway-quota-ratelimit-policy", &policy)
	rules, backend, model, budget := aiGatewayRules(t, policy)
	if budget < 8 {
		t.Fatalf("a budget of %d tokens: the flow below wants at least 8", budget)
	}
	redis := testenv.StartRedis(t)
	xdsSrv := testenv.StartXDS(t, "127.0.0.1:0", "envoy-ai-gateway-ratelimit", nil)
	root := newPodRoot(t)
	pd := &pod{root: root, name: "envoy-ai-gateway-ratelimit-0", addrs: map[string]string{
		"REDIS_URL": redis.Addr(), "CONFIG_GRPC_XDS_SERVER_URL": xdsSrv.Addr, "GRPC_PORT": "0"},
		extra: []string{"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1"}}
	s, _ := startPod(t, root, c, pd.env(t, c))
	waitLine(t, s, "arguments ignored", "--quotaRateLimitServiceAddr")
	if code, _ := s.get(t, s.httpAddr, "/healthcheck"); code == 200 {
		t.Error("/healthcheck 200 before the first rules (AI Gateway does not set FORCE_START_WITHOUT_INITIAL_CONFIG)")
	}
	xdsSrv.Set(t, "1", rules)
	testenv.Eventually(t, 10*time.Second, "the QuotaPolicy's rules ACKed", func() bool { return xdsSrv.Acked("1") })
	testenv.Eventually(t, 10*time.Second, "/healthcheck 200 with the rules in", func() bool {
		code, _ := s.get(t, s.httpAddr, "/healthcheck")
		return code == 200
	})
	ask := func(what string, req *rlsv3.RateLimitRequest, want rlsv3.RateLimitResponse_Code) {
		t.Helper()
		resp, err := s.client.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if resp.OverallCode != want {
			t.Fatalf("%s: %s, want %s", what, peerSummary(resp), want)
		}
		if st := resp.Statuses[0]; want == rlsv3.RateLimitResponse_OVER_LIMIT && st.DurationUntilReset.AsDuration() <= 0 {
			t.Errorf("%s: OVER_LIMIT with duration_until_reset %v, want positive (issue 30)", what, st.DurationUntilReset.AsDuration())
		}
	}
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT

	// AI Gateway's e2e: 2x the budget in tokens, then the next request is a 429.
	ask("request 1", aiRequest(backend, model, 0, false, false), ok)
	ask(fmt.Sprintf("request 1's %d tokens at stream end", 2*budget), aiRequest(backend, model, uint64(2*budget), true, false), over)
	ask("request 2", aiRequest(backend, model, 0, false, false), over)

	// The token_ratelimit example's zero-cost check, on a fresh budget.
	if err := goredis.NewClient(&goredis.Options{Addr: redis.Addr()}).FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	first, second := uint64(budget)-3, uint64(5) // the second passes the budget by 2
	ask("check 1 at zero cost", aiRequest(backend, model, 0, false, true), ok)
	ask(fmt.Sprintf("check 1's %d tokens", first), aiRequest(backend, model, first, true, false), ok)
	ask("check 2 at zero cost (3 tokens left)", aiRequest(backend, model, 0, false, true), ok)
	ask(fmt.Sprintf("check 2's %d tokens", second), aiRequest(backend, model, second, true, false), over)
	ask("check 3 at zero cost, the budget spent", aiRequest(backend, model, 0, false, true), over)
	for _, line := range s.log() {
		if strings.Contains(line, "not honoured") || strings.Contains(line, "level=ERROR") {
			t.Errorf("AI Gateway's environment: %s", line)
		}
	}
}
