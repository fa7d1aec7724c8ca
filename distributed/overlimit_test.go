package distributed

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// checkOverLimitFlood floods a denied key and checks that no call reaches the store until the
// RetryAfter instant, and that the request is allowed exactly then. calls reports the store
// calls so far (a counting wrapper, or Redis INFO commandstats).
func checkOverLimitFlood(t *testing.T, o *OverLimit, clock *sluicetest.ManualClock, rule sluice.Rule, calls func() int64) {
	t.Helper()
	ctx := context.Background()
	req := sluice.Request{Key: "flood", Rule: rule, N: 1}
	for range rule.Limit {
		if d, err := o.Take(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("under the limit: %+v %v", d, err)
		}
	}
	d, err := o.Take(ctx, req)
	if err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("over the limit: %+v %v", d, err)
	}
	retryAt := clock.Now().Add(d.RetryAfter)
	before := calls()
	for i := range 10_000 {
		if i%1000 == 999 {
			clock.Set(retryAt.Add(-time.Millisecond))
		}
		d, err := o.Take(ctx, req)
		if err != nil || d.Allowed {
			t.Fatalf("flood request %d: %+v %v", i, d, err)
		}
		if want := retryAt.Sub(clock.Now()); d.RetryAfter != want {
			t.Fatalf("cached RetryAfter %v, want %v", d.RetryAfter, want)
		}
	}
	if got := calls() - before; got != 0 {
		t.Fatalf("the flood made %d store calls, want 0", got)
	}
	clock.Set(retryAt)
	if d, err := o.Take(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("at RetryAfter: %+v %v, want allowed", d, err)
	}
	if got := calls() - before; got != 1 {
		t.Fatalf("at RetryAfter: %d store calls, want 1", got)
	}
}

func TestOverLimitFloodMemory(t *testing.T) {
	for _, rule := range []sluice.Rule{sluice.FixedWindow(5, time.Second), sluice.TokenBucket(5, time.Second, 5),
		sluice.SlidingWindow(5, time.Second, 4), sluice.GCRA(5, time.Second, 0)} {
		t.Run(rule.String(), func(t *testing.T) {
			clock := sluicetest.NewManualClock(t0)
			cs := &sluicetest.CountingStore{Store: newMemory(t, clock)}
			o, err := NewOverLimit(cs, WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			checkOverLimitFlood(t, o, clock, rule, cs.Calls)
		})
	}
}

// cachedDenial returns an over-limit cache on a memory store that holds a denial of key "k"
// under rule, 2 a minute (2 taken, the third denied), and the store's call counter.
func cachedDenial(t *testing.T) (o *OverLimit, cs *sluicetest.CountingStore, rule sluice.Rule) {
	clock := sluicetest.NewManualClock(t0)
	cs = &sluicetest.CountingStore{Store: newMemory(t, clock)}
	o, _ = NewOverLimit(cs, WithClock(clock))
	rule = sluice.FixedWindow(2, time.Minute)
	for range 3 {
		o.Take(context.Background(), sluice.Request{Key: "k", Rule: rule, N: 1})
	}
	return o, cs, rule
}

// A rule change (a dynamic limit) drops the cached denial: envoyproxy/ratelimit#1077.
func TestOverLimitRuleChange(t *testing.T) {
	o, cs, _ := cachedDenial(t)
	ctx := context.Background()
	raised := sluice.FixedWindow(10, time.Minute)
	if d, err := o.Take(ctx, sluice.Request{Key: "k", Rule: raised, N: 1}); err != nil || !d.Allowed {
		t.Fatalf("after raising the limit: %+v %v, want allowed", d, err)
	}
	// A smaller cost than the cached denial still asks the store.
	for range 5 { // 8 of 10 used
		o.Take(ctx, sluice.Request{Key: "k", Rule: raised, N: 1})
	}
	o.Take(ctx, sluice.Request{Key: "k", Rule: raised, N: 5})
	calls := cs.Calls()
	if d, _ := o.Take(ctx, sluice.Request{Key: "k", Rule: raised, N: 1}); !d.Allowed || cs.Calls() != calls+1 {
		t.Fatalf("n=1 after n=5 was denied: %+v, %d calls", d, cs.Calls()-calls)
	}
}

func TestOverLimitBounded(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	o, err := NewOverLimit(newMemory(t, clock), WithClock(clock), WithMaxKeys(64))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rule := sluice.FixedWindow(1, time.Hour)
	for i := range 5000 {
		key := "k" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String()
		o.Take(ctx, sluice.Request{Key: key, Rule: rule, N: 1})
		o.Take(ctx, sluice.Request{Key: key, Rule: rule, N: 1})
	}
	if n := o.Len(); n > 64 {
		t.Fatalf("%d entries, want at most 64", n)
	}
	if _, err := NewOverLimit(newMemory(t, clock), WithMaxKeys(0)); err == nil || !strings.Contains(err.Error(), "WithMaxKeys") {
		t.Fatalf("WithMaxKeys(0): %v", err)
	}
}

func TestOverLimitDeniedAllocatesNothing(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	o, _ := NewOverLimit(newMemory(t, clock), WithClock(clock))
	ctx := context.Background()
	req := sluice.Request{Key: "k", Rule: sluice.FixedWindow(1, time.Hour), N: 1}
	o.Take(ctx, req)
	o.Take(ctx, req)
	if a := testing.AllocsPerRun(1000, func() { o.Take(ctx, req) }); a != 0 {
		t.Fatalf("a cached denial allocates %v times", a)
	}
}

// TestOverLimitSettle: a settle reaches the store even while a denial of the key is cached (a
// charge past the limit must be recorded, not answered from the cache), and a refund makes
// the next request ask the store again.
func TestOverLimitSettle(t *testing.T) {
	o, cs, rule := cachedDenial(t)
	ctx := context.Background()
	calls := cs.Calls()
	d, err := o.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 3, Settle: true})
	if err != nil || !d.Allowed || cs.Calls() != calls+1 {
		t.Fatalf("settle 3 with a cached denial: %+v %v, %d store calls; want allowed, from the store", d, err, cs.Calls()-calls)
	}
	if d, _ := o.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: -4, Settle: true}); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("settle -4 (5 counted): %+v, want allowed, 1 remaining", d)
	}
	if d, _ := o.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1}); !d.Allowed {
		t.Fatalf("a request with 1 of 2 counted after the refund: %+v, want allowed (the cached denial dropped)", d)
	}
}
