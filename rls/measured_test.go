package rls_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// TestMeasuredCostsProperty (issue 30 item 5): a descriptor's own hits_addend is usage Envoy
// measured — Envoy Gateway's response cost, Envoy AI Gateway's tokens, sent when the stream
// ends — and is charged whatever the answer, so that the next request, a zero-cost check
// included, sees the budget spent; a request's own count over its limit still consumes
// nothing (#427). Over every algorithm, with and without quota_mode (AI Gateway's
// QuotaPolicy sets it), random sequences of zero-cost checks, measured costs from 1 to 3
// limits and counted requests, at one instant: every answer is the model's (usage u, over
// when u > limit), and five periods later the key is whole again, however much was charged.
func TestMeasuredCostsProperty(t *testing.T) {
	const limit = 10
	r := rand.New(rand.NewPCG(30, 5))
	for _, alg := range []string{"fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket", "gcra"} {
		for _, quota := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/quota_mode=%v", alg, quota), func(t *testing.T) {
				rules := fmt.Sprintf("domain: ai\ndescriptors:\n  - key: tenant\n    quota_mode: %v\n    rate_limit: {unit: minute, requests_per_unit: %d, algorithm: %s}\n", quota, limit, alg)
				e, clock := measuredEngine(t, rules)
				for scenario := range 60 {
					key := fmt.Sprintf("t%d", scenario)
					u := int64(0) // usage charged so far, at this instant
					for step := range 12 {
						kind, n := r.IntN(3), int64(0)
						d := desc("tenant", key)
						req := &rls.Request{Domain: "ai", Descriptors: []rls.Descriptor{d}}
						switch kind {
						case 0: // a zero-cost check (Envoy Gateway's request cost 0)
							req.Descriptors[0].HitsAddend = ptr(0)
						case 1: // a measured cost
							n = 1 + r.Int64N(3*limit)
							req.Descriptors[0].HitsAddend = ptr(uint64(n))
						default: // a counted request (request-level hits_addend 1)
							n = 1
						}
						var ans rls.Answer
						if err := e.Decide(context.Background(), req, &ans); err != nil {
							t.Fatal(err)
						}
						wantOver := u+n > limit
						if got := ans.Verdicts[0].Code == rls.CodeOverLimit; got != wantOver {
							t.Fatalf("scenario %d step %d (kind %d, n %d, usage %d): over %v, want %v", scenario, step, kind, n, u, got, wantOver)
						}
						if !wantOver || kind == 1 { // a measured cost is charged even when over
							u += n
						}
					}
					clock.Advance(5 * time.Minute)
					var ans rls.Answer
					zero := desc("tenant", key)
					zero.HitsAddend = ptr(0)
					if err := e.Decide(context.Background(), &rls.Request{Domain: "ai", Descriptors: []rls.Descriptor{zero}}, &ans); err != nil {
						t.Fatal(err)
					}
					if v := ans.Verdicts[0]; v.Code != rls.CodeOK || v.Remaining != limit {
						t.Fatalf("scenario %d: five periods after %d units were charged: %v, %d remaining, want OK with %d", scenario, u, v.Code, v.Remaining, limit)
					}
				}
			})
		}
	}
}

// measuredEngine is an engine of rules over a memory store on a manual clock.
func measuredEngine(t *testing.T, rules string) (*rls.Engine, *sluicetest.ManualClock) {
	t.Helper()
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC))
	mem, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	return newEngineConfig(t, rules, rls.Config{Store: mem}), clock
}

func ptr(n uint64) *uint64 { return &n }
