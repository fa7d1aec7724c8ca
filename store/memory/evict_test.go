package memory_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/storetest"
)

// evictionStart is midnight UTC, so every fixed window of the tests (periods that divide a
// day) starts with the test and none rolls over during it.
var evictionStart = time.Unix(1_700_006_400, 0)

// floodMixes are the periods of the flood keys: short, long and mixed.
var floodMixes = []struct {
	name     string
	min, max time.Duration
}{
	{"short", time.Millisecond, time.Minute},
	{"long", time.Hour, 24 * time.Hour},
	{"mixed", time.Millisecond, 24 * time.Hour},
}

// floodRule draws the rule of one flood key: any algorithm (storetest.RandomRule), a period in
// [min, max], a capacity of at least minCapacity.
func floodRule(rng *rand.Rand, lo, hi time.Duration, minCapacity int64) sluice.Rule {
	algorithms := sluice.Algorithms()
	for {
		r := storetest.RandomRule(rng, algorithms[rng.IntN(len(algorithms))])
		if r.Period >= lo && r.Period <= hi && r.Capacity() >= minCapacity {
			return r
		}
	}
}

// hotRule is the rule of a hot key of algorithm a: a limit of 2 to 30 in an hour or a day, so
// no unit comes back during a test (its clock moves less than a minute).
func hotRule(rng *rand.Rand, a sluice.Algorithm) sluice.Rule {
	r := sluice.Rule{Algorithm: a, Limit: 2 + rng.Int64N(29), Period: []time.Duration{time.Hour, 24 * time.Hour}[rng.IntN(2)]}
	if a == sluice.AlgorithmSlidingWindow && rng.IntN(2) == 0 {
		r.SubWindows = []int{2, 4, 12}[rng.IntN(3)]
	}
	return r
}

// evictionStore is a store of the tests' manual clock bounded by keys or by bytes.
func evictionStore(t *testing.T, clock *sluicetest.ManualClock, bound string, shards int) *memory.Store {
	t.Helper()
	opts := []memory.Option{memory.WithClock(clock), memory.WithSweepInterval(-1), memory.WithShards(shards)}
	if bound == "keys" {
		opts = append(opts, memory.WithMaxKeys(512))
	} else {
		opts = append(opts, memory.WithMaxBytes(192<<10))
	}
	s, err := memory.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// hotKey is a key the tests keep deciding while a flood goes on.
type hotKey struct {
	key                string
	rule               sluice.Rule
	start, gap         int // the flood step of its first request, and the steps between two
	asked, admitted    int64
	refused            int64
	deniedAt, afterDen int64 // the request of its first denial (-1: none), admissions after it
}

func (h *hotKey) String() string {
	return fmt.Sprintf("%s %v (from step %d every %d): %d admitted of %d, %d refused", h.key, h.rule, h.start, h.gap, h.admitted, h.asked, h.refused)
}

// take decides one unit of h's key, counting it.
func (h *hotKey) take(t *testing.T, s *memory.Store) {
	t.Helper()
	d, err := s.Take(context.Background(), sluice.Request{Key: h.key, Rule: h.rule, N: 1})
	h.asked++
	switch {
	case err != nil:
		if !errors.Is(err, memory.ErrFull) || !sluice.IsUnavailable(err) {
			t.Fatalf("%s: %v, want ErrFull wrapping sluice.ErrStoreUnavailable", h.key, err)
		}
		h.refused++
	case d.Allowed:
		h.admitted++
		if h.deniedAt >= 0 {
			h.afterDen++
		}
	case h.deniedAt < 0:
		h.deniedAt = h.asked
	}
}

// TestEvictionKeepsHotKeys (issue 31, item 1) is the property of eviction under floods of one
// request per key: of every period mix (short, long, mixed), every algorithm for the flood and
// for the hot keys, on stores bounded by keys and by bytes, with one shard, a few and many, a
// hot key admits exactly its limit, whether it started before the store was full or long
// after. Before the fix, eviction took the sampled key back to full soonest, so a flood of
// longer periods reset hot keys again and again.
func TestEvictionKeepsHotKeys(t *testing.T) {
	flood, seeds := 12_000, uint64(3)
	if raceEnabled {
		flood, seeds = 4_000, 1
	}
	for _, mix := range floodMixes {
		for _, bound := range []string{"keys", "bytes"} {
			for _, shards := range []int{1, 8, 64} {
				t.Run(fmt.Sprintf("%s/%s/shards=%d", mix.name, bound, shards), func(t *testing.T) {
					for seed := range seeds {
						evictionFlood(t, mix.min, mix.max, bound, shards, seed, flood)
					}
				})
			}
		}
	}
}

func evictionFlood(t *testing.T, lo, hi time.Duration, bound string, shards int, seed uint64, flood int) {
	rng := rand.New(rand.NewPCG(seed, uint64(shards)))
	clock := sluicetest.NewManualClock(evictionStart)
	s := evictionStore(t, clock, bound, shards)
	var hot []*hotKey
	for i, a := range sluice.Algorithms() {
		for _, late := range []bool{false, true} {
			h := &hotKey{key: fmt.Sprintf("hot:%d:%v", i, late), rule: hotRule(rng, a), gap: 1 + rng.IntN(20), deniedAt: -1}
			if late { // after the store is full: its first request is decided among the flood's
				h.start = flood/4 + rng.IntN(flood/4)
			}
			hot = append(hot, h)
		}
	}
	ctx := context.Background()
	for i := range flood {
		r := floodRule(rng, lo, hi, 2) // one request each: never over its limit
		if _, err := s.Take(ctx, sluice.Request{Key: "flood:" + strconv.Itoa(i), Rule: r, N: 1}); err != nil {
			t.Fatalf("seed %d, flood key %d (%v): %v", seed, i, r, err)
		}
		for _, h := range hot {
			if i >= h.start && (i-h.start)%h.gap == 0 {
				h.take(t, s)
			}
		}
		clock.Advance(time.Duration(rng.IntN(1000)) * time.Microsecond)
	}
	if s.Evictions() == 0 {
		t.Fatalf("seed %d: no key evicted: the flood did not fill the store", seed)
	}
	for _, h := range hot {
		if h.asked <= h.rule.Limit || h.admitted != h.rule.Limit || h.refused != 0 {
			t.Errorf("seed %d: %v, want exactly its limit", seed, h)
		}
	}
	if seed == 0 {
		t.Logf("%d flood keys: %d held, %d evicted; %d hot keys (one early and one late per algorithm), each exactly its limit", flood, s.Len(), s.Evictions(), len(hot))
	}
}

// TestEvictionNeverReadmitsOverLimit (issue 31, item 1) is the property for hostile floods:
// flood keys of every period mix and algorithm that take up to their whole capacity at once,
// some decided twice, some settled into debt, so the store fills with keys that may not be
// forgotten. Keys over their limit (hot keys driven to it first) and keys in debt are never
// evicted: none of them is admitted again. A hot key that starts during the flood is, once
// denied, never admitted again either (it is then over its limit). A new key that finds no
// key to forget is refused with ErrFull, which wraps sluice.ErrStoreUnavailable; the store
// stays within its bounds.
func TestEvictionNeverReadmitsOverLimit(t *testing.T) {
	flood, seeds := 6_000, uint64(3)
	if raceEnabled {
		flood, seeds = 3_000, 1
	}
	var refusals int64
	for _, mix := range floodMixes {
		for _, bound := range []string{"keys", "bytes"} {
			for _, shards := range []int{1, 64} {
				for seed := range seeds {
					refusals += hostileFlood(t, mix.min, mix.max, bound, shards, seed, flood)
				}
			}
		}
	}
	t.Logf("%d floods of %d keys (3 period mixes x 2 bounds x 2 shard counts x %d seeds): %d new keys refused with ErrFull, every key over its limit or in debt kept",
		len(floodMixes)*4*int(seeds), flood, seeds, refusals)
	if refusals == 0 {
		t.Error("no new key was refused: the floods never filled the store with keys that may not be forgotten")
	}
}

func hostileFlood(t *testing.T, lo, hi time.Duration, bound string, shards int, seed uint64, flood int) (refused int64) {
	t.Helper()
	name := fmt.Sprintf("%v-%v/%s/shards=%d/seed=%d", lo, hi, bound, shards, seed)
	rng := rand.New(rand.NewPCG(seed, 31))
	clock := sluicetest.NewManualClock(evictionStart)
	s := evictionStore(t, clock, bound, shards)
	ctx := context.Background()
	var full, debtors, late []*hotKey
	for i, a := range sluice.Algorithms() {
		h := &hotKey{key: "full:" + strconv.Itoa(i), rule: hotRule(rng, a), gap: 1 + rng.IntN(20), deniedAt: -1}
		for range h.rule.Capacity() {
			h.take(t, s)
		}
		if h.admitted != h.rule.Capacity() {
			t.Fatalf("%s: %v before the flood", name, h)
		}
		d := &hotKey{key: "debt:" + strconv.Itoa(i), rule: hotRule(rng, a), gap: 1 + rng.IntN(20), deniedAt: 0}
		d.take(t, s)
		if _, err := s.Take(ctx, sluice.Request{Key: d.key, Rule: d.rule, N: d.rule.Limit, Settle: true}); err != nil {
			t.Fatal(err)
		}
		l := &hotKey{key: "late:" + strconv.Itoa(i), rule: hotRule(rng, a), gap: 1 + rng.IntN(20), start: rng.IntN(flood / 2), deniedAt: -1}
		full, debtors, late = append(full, h), append(debtors, d), append(late, l)
	}
	for i := range flood {
		r := floodRule(rng, lo, hi, 1)
		key := "flood:" + strconv.Itoa(i)
		req := sluice.Request{Key: key, Rule: r, N: 1 + rng.Int64N(r.Capacity())}
		for k := range 1 + rng.IntN(2) { // some keys are decided twice
			if k == 1 && rng.IntN(4) == 0 {
				req.N, req.Settle = r.Capacity(), true // and some go into debt
			}
			if _, err := s.Take(ctx, req); err != nil {
				if !errors.Is(err, memory.ErrFull) || !sluice.IsUnavailable(err) {
					t.Fatalf("%s: flood key %d: %v, want ErrFull wrapping sluice.ErrStoreUnavailable", name, i, err)
				}
				refused++
				break
			}
		}
		for _, h := range append(append(full[:len(full):len(full)], debtors...), late...) {
			if i >= h.start && (i-h.start)%h.gap == 0 {
				h.take(t, s)
			}
		}
		if bound == "keys" && s.Len() > 512 || bound == "bytes" && s.Bytes() > 192<<10 {
			t.Fatalf("%s: after flood key %d: %d keys, %d bytes held, over the bound", name, i, s.Len(), s.Bytes())
		}
		clock.Advance(time.Duration(rng.IntN(1000)) * time.Microsecond)
	}
	for _, h := range full {
		if h.admitted != h.rule.Capacity() || h.refused != 0 {
			t.Errorf("%s: %v: a key over its limit was admitted again (evicted) or refused", name, h)
		}
	}
	for _, h := range debtors {
		if h.admitted != 1 || h.refused != 0 {
			t.Errorf("%s: %v: a key in debt was admitted again (evicted) or refused", name, h)
		}
	}
	for _, h := range late {
		if h.afterDen != 0 {
			t.Errorf("%s: %v: admitted %d times after its first denial (request %d)", name, h, h.afterDen, h.deniedAt)
		}
	}
	return refused
}

// TestDayFloodKeepsHourLimit is issue 31's repro: a rule of 100 an hour (the service's default
// algorithm, the sliding window) under a flood of 24-hour keys on a store of 16 MiB admitted
// 239 of 239 requests; it admits exactly 100, for a key decided from the start and for one
// whose first request comes when the store is already full. Under the race detector the store
// is 2 MiB and the flood 30,000 keys (the same turnover, an eighth of the time).
func TestDayFloodKeepsHourLimit(t *testing.T) {
	budget, flood := int64(16<<20), 240_000 // 16 MiB holds about 63,000 of them
	if raceEnabled {
		budget, flood = 2<<20, 30_000
	}
	clock := sluicetest.NewManualClock(evictionStart)
	s, err := memory.New(memory.WithMaxBytes(budget), memory.WithClock(clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hourly := sluice.Rule{Algorithm: sluice.AlgorithmSlidingWindow, Limit: 100, Period: time.Hour}
	daily := sluice.Rule{Algorithm: sluice.AlgorithmSlidingWindow, Limit: 100, Period: 24 * time.Hour}
	early := &hotKey{key: "api_key=early", rule: hourly, gap: flood / 240, deniedAt: -1}
	late := &hotKey{key: "api_key=late", rule: hourly, start: flood / 2, gap: flood / 480, deniedAt: -1}
	ctx := context.Background()
	for i := range flood {
		if _, err := s.Take(ctx, sluice.Request{Key: "flood:" + strconv.Itoa(i), Rule: daily, N: 1}); err != nil {
			t.Fatal(err)
		}
		for _, h := range []*hotKey{early, late} {
			if i >= h.start && (i-h.start)%h.gap == 0 {
				h.take(t, s)
			}
		}
		clock.Advance(50 * time.Microsecond)
	}
	t.Logf("%d keys of 24 h on %d MiB: %d held, %d evicted, %d bytes charged; %v; %v", flood, budget>>20, s.Len(), s.Evictions(), s.Bytes(), early, late)
	if s.Evictions() < int64(flood/2) {
		t.Errorf("%d keys evicted: the flood did not turn the store over", s.Evictions())
	}
	for _, h := range []*hotKey{early, late} {
		if h.asked < 240 || h.admitted != 100 || h.refused != 0 {
			t.Errorf("%v, want 100 of at least 240", h)
		}
	}
}
