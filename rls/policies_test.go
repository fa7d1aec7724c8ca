package rls_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/store/memory"
)

// The engine's policies (layered limits, criticality shares, hot parameters, unknown
// domains), as package server serves them.

const layeredRules = `
domain: api
descriptors:
  - key: tenant
    rate_limits:
      - {unit: minute, requests_per_unit: 5, name: business_quota}
      - {unit: minute, requests_per_unit: 3, scope: local, name: instance_guard}
`

// Two instances share the cluster store; each has its own local guard. The guard stops one
// instance at 3, the cluster quota stops the fleet at 5, and a request denied by either
// consumes from neither.
func TestLayeredClusterAndLocalLimits(t *testing.T) {
	a := start(t, layeredRules) // the guards run on the real clock: nothing here waits a minute
	b := start(t, layeredRules, func(c *rls.Config) { c.Store = a.store })
	code := func(h *harness) rls.Code {
		return h.ask(t, "api", desc("tenant", "acme")).Code
	}
	for i := range 3 {
		if c := code(a); c != rls.CodeOK {
			t.Fatalf("a request %d: %v, want OK", i, c)
		}
	}
	for i := range 4 { // the local guard of a: denied, nothing taken from the cluster
		if c := code(a); c != rls.CodeOverLimit {
			t.Fatalf("a request %d past its guard: %v, want OVER_LIMIT", 3+i, c)
		}
	}
	for i := range 2 { // b has its own guard; the cluster has 2 left
		if c := code(b); c != rls.CodeOK {
			t.Fatalf("b request %d: %v, want OK (the cluster quota has 5-3 left)", i, c)
		}
	}
	r := b.ask(t, "api", desc("tenant", "acme"))
	if r.Code != rls.CodeOverLimit || r.Verdicts[0].Remaining != 0 {
		t.Fatalf("b past the cluster quota: %v %+v", r.Code, r.Verdicts[0])
	}
	// The cluster store holds only the cluster limit's key: the guard never reached it.
	if n := a.store.Store.(*memory.Store).Len(); n != 1 {
		t.Errorf("the shared store holds %d keys, want 1 (the guard's keys stay in each instance)", n)
	}
	// the key form with the name of the limit counts on the same counters
	lim, err := a.e.NamedLimit("rule", "business_quota")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := a.e.DecideKey(context.Background(), "api|tenant=acme", lim, 1, ""); err != nil || d.Allowed {
		t.Errorf("key form on the layered limit: %+v %v, want a denial", d, err)
	}
}

const classRules = `
domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 10, criticality: {sheddable: 0.3}}
`

// A limit with criticality shares admits each class only while its share holds, on one
// counter: the class travels in a descriptor of its own entry; an unknown class is CRITICAL,
// counted and logged once.
func TestCriticalityClassesShareOneCounter(t *testing.T) {
	var logs testenv.LogBuffer
	h := start(t, classRules, func(c *rls.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	ask := func(class string) string {
		return h.ask(t, "api", desc("tenant", "acme"), desc("criticality", class)).Verdicts[0].Code.String()
	}
	var got []string
	for _, class := range []string{"SHEDDABLE", "SHEDDABLE", "SHEDDABLE", "SHEDDABLE", // 3 = 30%
		"SHEDDABLE_PLUS", "SHEDDABLE_PLUS", "SHEDDABLE_PLUS", "SHEDDABLE_PLUS", "SHEDDABLE_PLUS", // up to 7
		"urgent", "critical", "CRITICAL", // up to 9, the unknown one as CRITICAL
		"CRITICAL_PLUS", "CRITICAL_PLUS"} { // the last unit
		got = append(got, ask(class))
	}
	want := "[OK OK OK OVER_LIMIT OK OK OK OK OVER_LIMIT OK OK OVER_LIMIT OK OVER_LIMIT]"
	if fmt.Sprint(got) != want {
		t.Errorf("got  %v\nwant %s", got, want)
	}
	if m := h.metric(t, "sluice_criticality_unknown_total"); m != "sluice_criticality_unknown_total 1" {
		t.Errorf("unknown classes counted: %q", m)
	}
	ask("urgent")
	if n := len(logs.Records(t, "unknown criticality")); n != 1 {
		t.Errorf("%d log lines for unknown classes, want 1", n)
	}
	// The key form: a supplied rule with a class gets the default shares.
	supplied := &config.Limit{Rules: []sluice.Rule{{Algorithm: sluice.AlgorithmSlidingWindow, Limit: 2, Period: time.Minute}}}
	for i, want := range []bool{true, false} {
		d, err := h.e.DecideKey(context.Background(), "k", supplied, 1, "SHEDDABLE")
		if err != nil || d.Allowed != want {
			t.Errorf("key form, SHEDDABLE request %d on a limit of 2: %+v %v, want allowed %v", i, d, err, want)
		}
	}
}

const hotRules = `
domain: shop
descriptors:
  - key: product
    hot: {top_k: 100, cold_limit: 2}
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: product
    value: flash-sale
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// A hot parameter admits the first cold_limit requests of a value without a store call,
// then charges them to the store, which holds the value to its limit; an exception value
// has its own limit.
func TestHotParameterColdValuesCostNoStoreCall(t *testing.T) {
	h := start(t, hotRules)
	for i := range 50 {
		if c := h.ask(t, "shop", desc("product", "p"+strconv.Itoa(i))).Code; c != rls.CodeOK {
			t.Fatalf("cold value %d: %v", i, c)
		}
	}
	if n := h.store.Calls(); n != 0 {
		t.Fatalf("%d store calls for 50 cold values, want 0", n)
	}
	var codes []string
	for range 7 {
		codes = append(codes, h.ask(t, "shop", desc("product", "hot")).Code.String())
	}
	want := "[OK OK OK OK OK OVER_LIMIT OVER_LIMIT]"
	if got := fmt.Sprint(codes); got != want {
		t.Errorf("hot value: %s, want %s", got, want)
	}
	// 2 cold, then a settle of 2 and a take each for the next 5 requests.
	if n := h.store.Calls(); n != 6 {
		t.Errorf("%d store calls for the hot value, want 6 (one charge, five decisions)", n)
	}
	if c := h.ask(t, "shop", desc("product", "flash-sale")).Code; c != rls.CodeOK {
		t.Errorf("exception first request: %v", c)
	}
	if c := h.ask(t, "shop", desc("product", "flash-sale")).Code; c != rls.CodeOverLimit {
		t.Errorf("exception second request: %v, want its own limit of 1", c)
	}
}

// TestUnknownDomainLoggedOnce: a request for a domain no rules define is answered OK with no
// limit, as envoyproxy/ratelimit does, counted every time and logged once per domain, without
// a store call.
func TestUnknownDomainLoggedOnce(t *testing.T) {
	var logs testenv.LogBuffer
	h := start(t, goldenRules, func(c *rls.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	for _, domain := range []string{"nope", "nope", "other", "nope"} {
		if got := summary(h.ask(t, domain, desc("remote_address", "x"), desc("path", "/login"))); got != "OK: OK; OK" {
			t.Errorf("%s: %s", domain, got)
		}
	}
	recs := logs.Records(t, "request for a domain no rules define")
	var domains []string
	for _, r := range recs {
		domains = append(domains, r["domain"].(string))
	}
	if got := strings.Join(domains, ","); got != `"nope","other"` {
		t.Errorf("logged domains %s, want each once", got)
	}
	if v := h.metricValue(t, "sluice_unknown_domain_requests_total"); v != 4 {
		t.Errorf("sluice_unknown_domain_requests_total %v, want 4", v)
	}
	if n := h.store.Calls(); n != 0 {
		t.Errorf("%d store calls", n)
	}
}
