package memory_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/storetest"
)

func newStore(t *testing.T, clock sluice.Clock) sluice.Store {
	s, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, newStore) }

func TestOptionsRejected(t *testing.T) {
	for name, opt := range map[string]memory.Option{
		"WithMaxKeys":       memory.WithMaxKeys(0),
		"WithShards":        memory.WithShards(-1),
		"WithSweepInterval": memory.WithSweepInterval(0),
		"WithMaxKeyLength":  memory.WithMaxKeyLength(-1),
	} {
		if _, err := memory.New(opt); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name the option", name, err)
		}
	}
}

func TestSweepRemovesOnlyFullKeys(t *testing.T) {
	clock := sluicetest.NewManualClock(storetest.Base)
	s, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	short, long := sluice.FixedWindow(1, time.Second), sluice.FixedWindow(1, time.Hour)
	s.Take(ctx, sluice.Request{Key: "short", Rule: short, N: 1})
	s.Take(ctx, sluice.Request{Key: "long", Rule: long, N: 1})
	s.Take(ctx, sluice.Request{Key: "peeked", Rule: long, N: 0}) // leaves nothing behind
	if s.Len() != 2 {
		t.Fatalf("%d keys, want 2", s.Len())
	}
	clock.Advance(time.Second)
	s.Sweep()
	if s.Len() != 1 {
		t.Fatalf("after 1s: %d keys, want 1 (the hour-long window)", s.Len())
	}
	if d, _ := s.Take(ctx, sluice.Request{Key: "long", Rule: long, N: 1}); d.Allowed {
		t.Error("the swept store forgot a live key")
	}
}

func TestMaxKeysBoundsMemory(t *testing.T) {
	clock := sluicetest.NewManualClock(storetest.Base)
	s, err := memory.New(memory.WithClock(clock), memory.WithMaxKeys(256), memory.WithShards(4), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rule := sluice.FixedWindow(5, time.Hour)
	for i := 0; i < 10_000; i++ {
		if _, err := s.Take(ctx, sluice.Request{Key: fmt.Sprintf("flood:%d", i), Rule: rule, N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Len(); n > 256 {
		t.Errorf("%d keys held, max 256", n)
	}
	if s.Evictions() == 0 {
		t.Error("no evictions counted")
	}
	// Expired entries are evicted before live ones.
	s2, _ := memory.New(memory.WithClock(clock), memory.WithMaxKeys(4), memory.WithShards(1), memory.WithSweepInterval(-1))
	for i := 0; i < 4; i++ {
		s2.Take(ctx, sluice.Request{Key: fmt.Sprint("old", i), Rule: sluice.FixedWindow(5, time.Second), N: 1})
	}
	clock.Advance(2 * time.Second)
	s2.Take(ctx, sluice.Request{Key: "new", Rule: rule, N: 1})
	if s2.Evictions() != 0 {
		t.Errorf("evicted %d live keys while expired ones were there", s2.Evictions())
	}
}

func TestAlgorithmChangeStartsFresh(t *testing.T) {
	s := newStore(t, sluicetest.NewManualClock(storetest.Base))
	ctx := context.Background()
	s.Take(ctx, sluice.Request{Key: "k", Rule: sluice.FixedWindow(1, time.Second), N: 1})
	d, err := s.Take(ctx, sluice.Request{Key: "k", Rule: sluice.TokenBucket(1, time.Second, 0), N: 1})
	if err != nil || !d.Allowed {
		t.Errorf("%+v %v", d, err)
	}
}

func TestZeroAllocationsPerDecision(t *testing.T) {
	s := newStore(t, sluicetest.NewManualClock(storetest.Base))
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		req := sluice.Request{Key: "alloc:" + a.String(), Rule: sluice.Rule{Algorithm: a, Limit: 100, Period: time.Second}, N: 1}
		s.Take(ctx, req) // the first decision creates the key
		if n := testing.AllocsPerRun(200, func() { s.Take(ctx, req) }); n != 0 {
			t.Errorf("%s: %.1f allocations per decision, want 0", a, n)
		}
	}
	def, _ := memory.New() // the default system clock
	defer def.Close()
	req := sluice.Request{Key: "alloc", Rule: sluice.GCRA(100, time.Second, 0), N: 1}
	def.Take(ctx, req)
	if n := testing.AllocsPerRun(200, func() { def.Take(ctx, req) }); n != 0 {
		t.Errorf("system clock: %.1f allocations per decision", n)
	}
}

// TestSlidingLogMemoryFollowsUse is the 20 keys of a sliding log of 1,000,000 a year:
// each key held 8 MB from its first request (RSS 25 -> 184 MB). The log grows with the units
// it holds, so 20 keys of one unit each cost a few hundred bytes each; a full log still admits
// exactly its limit.
func TestSlidingLogMemoryFollowsUse(t *testing.T) {
	ctx := context.Background()
	s, err := memory.New(memory.WithClock(sluicetest.NewManualClock(time.Unix(1e9, 0))), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rule := sluice.SlidingLog(sluice.MaxSlidingLogLimit, 365*24*time.Hour)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 20 {
		if d, err := s.Take(ctx, sluice.Request{Key: fmt.Sprint("big-", i), Rule: rule, N: 1}); err != nil || !d.Allowed {
			t.Fatalf("key %d: %+v %v", i, d, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("20 keys of a sliding log of %d, one unit each: heap +%d bytes", sluice.MaxSlidingLogLimit, grew)
	if grew > 1<<20 {
		t.Errorf("heap grew by %d bytes for 20 keys of one unit, want under 1 MiB", grew)
	}
	runtime.KeepAlive(s)
	// Growing by doubling keeps the log exact: 5 units, then 1,000 in steps, then the limit.
	small := sluice.SlidingLog(1000, time.Minute)
	admitted := int64(0)
	for _, n := range []int64{5, 3, 100, 400, 492, 1} {
		d, err := s.Take(ctx, sluice.Request{Key: "grow", Rule: small, N: n})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted += n
		}
		if d.Remaining != 1000-admitted {
			t.Fatalf("after %d: remaining %d, want %d", n, d.Remaining, 1000-admitted)
		}
	}
	if admitted != 1000 {
		t.Errorf("admitted %d, want 1000", admitted)
	}
}

func TestLeaseConformance(t *testing.T) { storetest.RunLeases(t, newStore) }
