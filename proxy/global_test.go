package proxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/distributed/regions"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// TestGlobalLimitThroughTheRegions (issue 37): the proxy decides a limit of scope global on
// its regions' store (proxy.Config.GlobalStore): in escrow mode, a region holding no share
// yet denies; once the coordinator allocated it its share of the limit, it admits that.
func TestGlobalLimitThroughTheRegions(t *testing.T) {
	rules := `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 30, algorithm: fixed_window, scope: global}
proxy:
  rate_limits:
    - actions: [{remote_address: {}}]
`
	// The regions' epochs on a clock the test holds, mid-epoch (within MaxClockSkew of an
	// epoch's edge a region decides on the smaller of two shares): a loaded machine cannot move
	// a request into the next epoch.
	clock := sluicetest.NewManualClock(t0.Add(500 * time.Millisecond))
	eu, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eu.Close() })
	us, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = us.Close() })
	coord := regions.NewMemoryCoordinator()
	global, err := regions.New(regions.Config{Region: "eu", Regions: []regions.Region{{Name: "eu", Store: eu}, {Name: "us", Store: us}},
		Coordinator: coord, Manual: true, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = global.Close() })
	up := newUpstream(t)
	p := startProxy(t, up, rules, func(c *proxy.Config) { c.GlobalStore = global })
	if passed, _ := countPassed(t, p.base+"/a", 1); passed != 0 {
		t.Fatalf("%d passed before the region held a share", passed)
	}
	ctx := context.Background()
	if err := global.Sync(ctx); err != nil { // the first epochs: eu alone is live
		t.Fatal(err)
	}
	passed, denied := countPassed(t, p.base+"/a", 40)
	if passed != 30 || denied != 10 {
		t.Fatalf("passed %d, denied %d, want the whole limit (30) with eu the only live region", passed, denied)
	}
}
