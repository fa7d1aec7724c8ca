package hotkey_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// fleet is n instances, each with its own Param, over one shared memory store.
type fleet struct {
	clock  *sluicetest.ManualClock
	lim    *sluice.Limiter
	params []*hotkey.Param
}

func newFleet(t *testing.T, n int, rule sluice.Rule, cfg hotkey.Config) *fleet {
	t.Helper()
	f := &fleet{clock: sluicetest.NewManualClock(t0)}
	mem, err := memory.New(memory.WithClock(f.clock), memory.WithSweepInterval(-1), memory.WithMaxKeys(1<<22))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	f.lim = sluice.New(mem)
	cfg.Clock = f.clock
	for range n {
		p, err := hotkey.New(rule, cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.params = append(f.params, p)
	}
	return f
}

// result of one traffic run.
type result struct {
	requests, storeCalls int64
	worst                int64 // the most units of one value admitted in one fixed window
	// firstCold counts the requests among the first cold of their value in their window at
	// their instance: the calls an exact per-value counter in each instance would save.
	firstCold int64
}

// run sends requests values drawn by next over seconds seconds, spread evenly, each to the
// instance i % len(params), and counts admissions per value and fixed window.
func (f *fleet) run(t *testing.T, seconds, perSecond int, next func() string) result {
	t.Helper()
	var r result
	step := time.Second / time.Duration(perSecond)
	for range seconds {
		admitted := map[string]int64{}
		seen := make([]map[string]int64, len(f.params))
		for i := range seen {
			seen[i] = map[string]int64{}
		}
		for i := range perSecond {
			v := next()
			p := f.params[i%len(f.params)]
			seen[i%len(f.params)][v]++
			if seen[i%len(f.params)][v] <= p.ColdLimit() {
				r.firstCold++
			}
			d, err := p.Allow(context.Background(), f.lim, "product|"+v, v, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted[v]++
				r.worst = max(r.worst, admitted[v])
			}
			r.requests++
			f.clock.Advance(step)
		}
	}
	for _, p := range f.params {
		r.storeCalls += p.Stats().StoreCalls
	}
	return r
}

// One instance never admits a value above its limit, whatever the mix of hot and cold
// values, and the sketch sends the hot values to the store.
func TestParamNeverOverAdmitsOnOneInstance(t *testing.T) {
	rule := sluice.FixedWindow(20, time.Second)
	f := newFleet(t, 1, rule, hotkey.Config{TopK: 50, ColdLimit: 5})
	rng := rand.New(rand.NewPCG(3, 4))
	r := f.run(t, 5, 5000, func() string {
		if rng.IntN(2) == 0 {
			return "hot" + strconv.Itoa(rng.IntN(3)) // a few values far over their limit
		}
		return strconv.Itoa(rng.IntN(20000))
	})
	if r.worst > rule.Limit {
		t.Errorf("a value was admitted %d times in one window, above its limit %d", r.worst, rule.Limit)
	}
	if r.worst < rule.Limit {
		t.Errorf("the hot values got %d in a window, want their whole limit %d", r.worst, rule.Limit)
	}
	if r.storeCalls == 0 || r.storeCalls == r.requests {
		t.Errorf("%d store calls for %d requests: the sketch sends none or all", r.storeCalls, r.requests)
	}
}

// zipfValues draws from 1M values with s = 1.1.
func zipfValues(seed uint64) func() string {
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, seed+1)), 1.1, 1, 1_000_000-1)
	return func() string { return strconv.FormatUint(z.Uint64(), 10) }
}

// TestZipfStoreCallsSaved measures the store calls saved on a Zipf parameter (1M values,
// s = 1.1) and the fleet's over-admission against its bound (docs/ACCURACY.md).
func TestZipfStoreCallsSaved(t *testing.T) {
	const perSecond = 100_000
	seconds := 3
	if raceEnabled {
		seconds = 1
	}
	rule := sluice.FixedWindow(100, time.Second)
	for _, c := range []struct {
		instances int
		cold      int64
	}{{1, 10}, {4, 10}, {4, 25}, {8, 10}} {
		t.Run(fmt.Sprintf("instances=%d,cold=%d", c.instances, c.cold), func(t *testing.T) {
			f := newFleet(t, c.instances, rule, hotkey.Config{TopK: 1000, ColdLimit: c.cold})
			r := f.run(t, seconds, perSecond, zipfValues(7))
			saved := 1 - float64(r.storeCalls)/float64(r.requests)
			ideal := float64(r.firstCold) / float64(r.requests)
			bound := rule.Limit + int64(c.instances-1)*c.cold
			t.Logf("%d instances, cold_limit %d, %d req/s over 1M values (s=1.1): %.1f%% of store calls saved (exact counters per instance: %.1f%%); most admitted for one value in a window: %d (limit %d, bound limit + (N-1) x cold = %d)",
				c.instances, c.cold, perSecond, 100*saved, 100*ideal, r.worst, rule.Limit, bound)
			if r.worst > bound {
				t.Errorf("a value got %d in a window, above the fleet bound %d", r.worst, bound)
			}
			if c.instances == 1 && r.worst > rule.Limit {
				t.Errorf("one instance admitted %d, above the limit %d", r.worst, rule.Limit)
			}
			if saved < 0.8*ideal {
				t.Errorf("%.1f%% of store calls saved, less than 80%% of the %.1f%% that exact counters would", 100*saved, 100*ideal)
			}
		})
	}
}
