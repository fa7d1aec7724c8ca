package rls_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
)

// The golden decisions of the engine, as package server answers them over RLS (its tests
// of the transport render the same summaries).

// goldenRules are the rules the golden decisions are decided under.
var goldenRules = readTestdata("golden.yaml")

func req(descs ...rls.Descriptor) *rls.Request {
	return &rls.Request{Domain: "golden", Descriptors: descs}
}

func withHits(d rls.Descriptor, n uint64) rls.Descriptor {
	d.HitsAddend = &n
	return d
}

func TestGoldenValueLessKey(t *testing.T) {
	h := start(t, goldenRules)
	runSteps(t, h, []step{
		{0, req(desc("remote_address", "10.0.0.1")), "OK: OK 1/2 per second reset 2s"},
		{0, req(desc("remote_address", "10.0.0.1")), "OK: OK 0/2 per second reset 2s"},
		{0, req(desc("remote_address", "10.0.0.1")), "OVER_LIMIT: OVER_LIMIT 0/2 per second reset 2s"}, // 1.5s rounded up to whole seconds, as envoyproxy/ratelimit
		{0, req(desc("remote_address", "10.0.0.2")), "OK: OK 1/2 per second reset 2s"},                 // own counter
		{2 * time.Second, req(desc("remote_address", "10.0.0.1")), "OK: OK 1/2 per second reset 2s"},
	})
}

func TestGoldenNestedDescriptors(t *testing.T) {
	h := start(t, goldenRules)
	login := func(user string) rls.Descriptor { return desc("path", "/login", "user", user) }
	runSteps(t, h, []step{
		{0, req(login("ann")), "OK: OK 0/1 per hour per_user_login reset 2h0m0s"},
		{0, req(login("ann")), "OVER_LIMIT: OVER_LIMIT 0/1 per hour per_user_login reset 2h0m0s"},
		{0, req(login("bob")), "OK: OK 0/1 per hour per_user_login reset 2h0m0s"},
		{0, req(desc("path", "/login")), "OK: OK 2/3 per minute reset 2m0s"},
		{0, req(desc("path", "/other")), "OK: OK"},                   // no rule
		{0, req(desc("path", "/login", "x", "y")), "OK: OK"},         // deeper than the config
		{0, req(desc("user", "ann")), "OK: OK"},                      // nested key alone
		{0, req(desc("remote_address", "a", "user", "b")), "OK: OK"}, // no children
	})
}

func TestGoldenUnlimitedMakesNoStoreCall(t *testing.T) {
	h := start(t, goldenRules)
	for range 50 {
		if got := summary(h.ask(t, "golden", desc("static", "x"))); got != "OK: OK" {
			t.Fatalf("unlimited: %s", got)
		}
	}
	if n := h.store.Calls(); n != 0 {
		t.Errorf("%d store calls for unlimited and unmatched descriptors", n)
	}
	if line := h.metric(t, `sluice_decisions_total{domain="golden",result="unlimited",rule="golden.static"}`); !strings.HasSuffix(line, " 50") {
		t.Errorf("unlimited metric: %q", line)
	}
}

func TestGoldenShadowMode(t *testing.T) {
	h := start(t, goldenRules)
	runSteps(t, h, []step{
		{0, req(desc("shadow", "x")), "OK: OK 0/1 per second reset 2s"},
		{0, req(desc("shadow", "x")), "OK: OK 0/1 per second reset 2s"}, // would deny
		// A shadow descriptor over its limit does not stop the others from consuming.
		{0, req(desc("shadow", "x"), desc("remote_address", "s")), "OK: OK 0/1 per second reset 2s; OK 1/2 per second reset 2s"},
	})
	if line := h.metric(t, `sluice_shadow_would_deny_total{domain="golden",rule="golden.shadow"}`); !strings.HasSuffix(line, " 2") {
		t.Errorf("shadow metric: %q", line)
	}
}

func TestGoldenOverrideAndHits(t *testing.T) {
	h := start(t, goldenRules)
	override := func(kv ...string) rls.Descriptor {
		d := desc(kv...)
		d.Limit = &rls.Override{RequestsPerUnit: 1, Unit: config.UnitMinute, UnitMultiplier: 2}
		return d
	}
	runSteps(t, h, []step{
		// A request-supplied limit replaces the configured one (2/s) and applies to any key.
		{0, req(override("remote_address", "o")), "OK: OK 0/1 per 2xminute reset 4m0s"},
		{0, req(override("remote_address", "o")), "OVER_LIMIT: OVER_LIMIT 0/1 per 2xminute reset 4m0s"},
		{0, req(override("not_in_config", "x")), "OK: OK 0/1 per 2xminute reset 4m0s"},
		// hits_addend 0 peeks: nothing consumed.
		{0, req(withHits(desc("remote_address", "h"), 0)), "OK: OK 2/2 per second reset 0s"},
		// Request-level hits_addend.
		{0, &rls.Request{Domain: "golden", HitsAddend: 2, Descriptors: []rls.Descriptor{desc("remote_address", "h")}},
			"OK: OK 0/2 per second reset 2s"},
		// A request's cost above the capacity is denied and consumes nothing (#427); OVER_LIMIT
		// reports 0 remaining, and a reset of the period, not 0 (issue 30: a client told 0
		// retries at once).
		{time.Minute, &rls.Request{Domain: "golden", HitsAddend: 1 << 31, Descriptors: []rls.Descriptor{desc("remote_address", "big")}},
			"OVER_LIMIT: OVER_LIMIT 0/2 per second reset 1s"},
		{0, req(withHits(desc("remote_address", "big"), 1)), "OK: OK 1/2 per second reset 2s"},
		// A descriptor's own cost is usage Envoy measured (Envoy Gateway's response cost, AI
		// Gateway's tokens at stream end): charged whatever the answer, at most two capacities,
		// so the key is over its limit, a zero-cost check too, until it drains.
		{0, req(withHits(desc("remote_address", "big"), 1<<40)), "OVER_LIMIT: OVER_LIMIT 0/2 per second reset 1s"},
		{0, req(withHits(desc("remote_address", "big"), 0)), "OVER_LIMIT: OVER_LIMIT 0/2 per second reset 2s"},
		{3 * time.Second, req(withHits(desc("remote_address", "big"), 0)), "OK: OK 2/2 per second reset 0s"},
	})
}

// TestGoldenOverLimitConsumesNothing is envoyproxy/ratelimit issue #427: when one descriptor
// is over its limit, the others of the request are not charged.
func TestGoldenOverLimitConsumesNothing(t *testing.T) {
	h := start(t, goldenRules)
	login := desc("path", "/login", "user", "eve")
	runSteps(t, h, []step{
		{0, req(desc("remote_address", "c"), login), "OK: OK 1/2 per second reset 2s; OK 0/1 per hour per_user_login reset 2h0m0s"},
		{0, req(desc("remote_address", "c"), login), "OVER_LIMIT: OK 1/2 per second reset 2s; OVER_LIMIT 0/1 per hour per_user_login reset 2h0m0s"},
		{0, req(login, desc("remote_address", "c")), "OVER_LIMIT: OVER_LIMIT 0/1 per hour per_user_login reset 2h0m0s; OK 1/2 per second reset 2s"},
		{0, req(desc("remote_address", "c")), "OK: OK 0/2 per second reset 2s"},
		// A later descriptor that is also out of capacity is reported over limit too.
		{0, req(login, desc("remote_address", "c")), "OVER_LIMIT: OVER_LIMIT 0/1 per hour per_user_login reset 2h0m0s; OVER_LIMIT 0/2 per second reset 2s"},
	})
}

func TestGoldenSeveralLimitsOnOneDescriptor(t *testing.T) {
	h := start(t, goldenRules)
	tiered := func() *rls.Request { return req(desc("tiered", "k")) }
	runSteps(t, h, []step{
		{0, tiered(), "OK: OK 1/2 per second reset 1m0s"},
		{0, tiered(), "OK: OK 0/2 per second reset 1m0s"},
		{0, tiered(), "OVER_LIMIT: OVER_LIMIT 0/2 per second reset 1s"}, // the burst (500ms, rounded up)
		{time.Second, tiered(), "OK: OK 0/3 per 30xsecond reset 59s"},   // the sustained limit
		{time.Second, tiered(), "OVER_LIMIT: OVER_LIMIT 0/3 per 30xsecond reset 38s"},
	})
}
