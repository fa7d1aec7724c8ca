package distributed

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestOverLimitCountsDeniedAsPeer: in envoyproxy/ratelimit's mode (its hits counted when
// denied, sluice.DeniedCounter), a take the store denies is charged there before its denial is
// cached, and a flood answered from the cache makes no store call and charges nothing, as the
// peer's local cache. Then the key's fixed window ends and it is admitted again.
func TestOverLimitCountsDeniedAsPeer(t *testing.T) {
	ctx := context.Background()
	clock := sluicetest.NewManualClock(t0)
	mem := newMemory(t, clock)
	cs := &sluicetest.CountingStore{Store: mem}
	o, err := NewOverLimit(cs, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	rule := sluice.FixedWindow(3, time.Second)
	req := sluice.Request{Key: "k", Rule: rule, N: 2}
	if d, err := sluice.TakeCountingDenied(ctx, o, req); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("first take: %+v %v", d, err)
	}
	before := cs.Calls()
	d, err := sluice.TakeCountingDenied(ctx, o, req)
	if err != nil || d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("over the limit: %+v %v, want denied for 1s", d, err)
	}
	if got := cs.Calls() - before; got != 2 {
		t.Fatalf("the store's denial made %d store calls, want 2 (the take and its charge)", got)
	}
	// The charge went past the limit (2 + 2 = 4): a refund of 1 leaves the key still at it.
	if r, err := mem.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: -1}); err != nil || r.Remaining != 0 {
		t.Fatalf("after the charged denial, a refund of 1: %+v %v, want 0 remaining (4 counted)", r, err)
	}
	before = cs.Calls()
	for i := range 1000 {
		clock.Advance(time.Millisecond / 2)
		d, err := sluice.TakeCountingDenied(ctx, o, req)
		if err != nil || d.Allowed {
			t.Fatalf("flood request %d: %+v %v", i, d, err)
		}
	}
	if got := cs.Calls() - before; got != 0 {
		t.Fatalf("the cached denials made %d store calls, want 0", got)
	}
	clock.Set(t0.Add(time.Second))
	if d, err := sluice.TakeCountingDenied(ctx, o, req); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("next window: %+v %v, want allowed, 1 remaining", d, err)
	}
}

// TestTakeCountingDeniedGeneric: on a store that is no DeniedCounter, a denied take is
// charged by a settle, an allowed one and a peek are not.
func TestTakeCountingDeniedGeneric(t *testing.T) {
	ctx := context.Background()
	clock := sluicetest.NewManualClock(t0)
	mem := newMemory(t, clock)
	rule := sluice.FixedWindow(3, time.Second)
	for i, want := range []bool{true, false, false} {
		d, err := sluice.TakeCountingDenied(ctx, mem, sluice.Request{Key: "k", Rule: rule, N: 2})
		if err != nil || d.Allowed != want {
			t.Fatalf("take %d: %+v %v, want allowed %v", i, d, err, want)
		}
	}
	// 2 admitted + 2 x 2 charged = 6: a refund of 3 still leaves the key full.
	if d, err := mem.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: -3}); err != nil || d.Remaining != 0 {
		t.Fatalf("refund of 3 after two charged denials: %+v %v, want 0 remaining", d, err)
	}
	if d, err := sluice.TakeCountingDenied(ctx, mem, sluice.Request{Key: "p", Rule: rule}); err != nil || !d.Allowed || d.Remaining != 3 {
		t.Fatalf("peek: %+v %v", d, err)
	}
}

// nextStore is a memory store whose fixed windows tell when the next unit frees after an
// allowed take that leaves nothing (the window's end), as the Redis store's scripts do.
type nextStore struct{ sluice.Store }

func (s nextStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	d, err := s.Store.Take(ctx, req)
	if d.Allowed && d.Remaining == 0 && req.N > 0 && !req.Settle {
		d.NextAfter = d.ResetAfter
	}
	return d, err
}

// TestOverLimitHoldsAfterLastUnit: an allowed take that leaves nothing and says when the next
// unit frees (Decision.NextAfter) holds the key's next requests until then without a store
// call, as a cached denial; at that instant the store is asked again.
func TestOverLimitHoldsAfterLastUnit(t *testing.T) {
	ctx := context.Background()
	clock := sluicetest.NewManualClock(t0)
	cs := &sluicetest.CountingStore{Store: nextStore{newMemory(t, clock)}}
	o, err := NewOverLimit(cs, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	rule := sluice.FixedWindow(3, time.Second)
	req := sluice.Request{Key: "k", Rule: rule, N: 1}
	clock.Advance(250 * time.Millisecond)
	for i := range 3 {
		if d, err := o.Take(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("take %d: %+v %v", i, d, err)
		}
	}
	before := cs.Calls()
	for i := range 1000 {
		d, err := o.Take(ctx, req)
		if err != nil || d.Allowed || d.RetryAfter != t0.Add(time.Second).Sub(clock.Now()) {
			t.Fatalf("request %d after the last unit: %+v %v, want denied until the window's end", i, d, err)
		}
		clock.Advance(700 * time.Microsecond)
	}
	if got := cs.Calls() - before; got != 0 {
		t.Fatalf("the requests after the last unit made %d store calls, want 0", got)
	}
	clock.Set(t0.Add(time.Second))
	if d, err := o.Take(ctx, req); err != nil || !d.Allowed || d.Remaining != 2 {
		t.Fatalf("at the window's end: %+v %v, want allowed", d, err)
	}
	if got := cs.Calls() - before; got != 1 {
		t.Fatalf("%d store calls, want 1", got)
	}
}
