package rls_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// TestCountDeniedKeepsOverLimitCache: in envoyproxy/ratelimit's mode (CountDenied, a fixed
// window, the over-limit cache in front of the store, what a drop-in with the peer's
// LOCAL_CACHE_SIZE_IN_BYTES runs), a hot key over its limit costs its store nothing while its
// denial is cached: the denial the store gives is charged there (the take and its settle),
// those answered from the cache are not, as the peer's local cache (issue 34, item 1).
func TestCountDeniedKeepsOverLimitCache(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := sluicetest.NewManualClock(t0)
	mem, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	cs := &sluicetest.CountingStore{Store: mem}
	ol, err := distributed.NewOverLimit(cs, distributed.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := config.Decode("rules.yaml", []byte("domain: d\ndescriptors:\n  - key: hot\n    rate_limit: {unit: second, requests_per_unit: 5, algorithm: fixed_window}\n"))
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := config.Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	e, err := rls.New(rls.Config{Rules: compiled, Store: ol, ReloadInterval: -1, CountDenied: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	req := &rls.Request{Domain: "d", Descriptors: []rls.Descriptor{desc("hot", "x")}}
	var ans rls.Answer
	decide := func() bool {
		t.Helper()
		if err := e.Decide(ctx, req, &ans); err != nil {
			t.Fatal(err)
		}
		return ans.Verdicts[0].Denied()
	}
	for i := range 5 {
		if decide() {
			t.Fatalf("request %d under the limit denied", i)
		}
	}
	before := cs.Calls()
	if !decide() {
		t.Fatal("request 6 admitted, want over the limit")
	}
	if got := cs.Calls() - before; got != 2 {
		t.Fatalf("the first denial made %d store calls, want 2 (the take, and the charge of its hit)", got)
	}
	before = cs.Calls()
	for i := range 1000 {
		clock.Advance(time.Millisecond / 2)
		if !decide() {
			t.Fatalf("flood request %d admitted", i)
		}
	}
	if got := cs.Calls() - before; got != 0 {
		t.Fatalf("1000 cached denials made %d store calls, want 0", got)
	}
	clock.Set(t0.Add(time.Second))
	if decide() {
		t.Fatal("the next window's first request denied")
	}
}
