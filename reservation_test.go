package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// TestReserveSeveralBudgets: a reservation on tokens per minute and dollars per month is
// admitted only if both admit; when the second refuses, the first is given back and Denied
// names the second, with when it frees; a commit settles each budget at its own real cost.
func TestReserveSeveralBudgets(t *testing.T) {
	l, clock := newLimiter(t)
	ctx := context.Background()
	tokens := sluice.Budget{Rule: sluice.FixedWindow(1000, time.Minute), Mode: sluice.Strict}
	dollars := sluice.Budget{Rule: sluice.SlidingWindow(50_000_000, 30*24*time.Hour, 30)} // $50 in micro-dollars
	hold := func(tok, usd int64) []sluice.Hold {
		return []sluice.Hold{{Key: "tenant:7:tokens", Budget: tokens, N: tok}, {Key: "tenant:7:usd", Budget: dollars, N: usd}}
	}
	r, err := l.ReserveAll(ctx, hold(600, 30_000_000))
	if err != nil || !r.Decision.Allowed || r.Denied != -1 {
		t.Fatalf("reserve 600 tokens, $30: %+v %v", r, err)
	}
	// $25 more does not fit the $20 left... but the dollars are bounded: admitted while not spent
	r2, err := l.ReserveAll(ctx, hold(300, 25_000_000))
	if err != nil || !r2.Decision.Allowed {
		t.Fatalf("reserve 300 tokens, $25: %+v %v", r2, err)
	}
	// the dollars are spent now ($55 of $50): a third is refused by them, its tokens given back
	r3, err := l.ReserveAll(ctx, hold(50, 1))
	if err != nil || r3.Decision.Allowed || r3.Denied != 1 || r3.Decision.RetryAfter <= 0 {
		t.Fatalf("reserve with the dollars spent: %+v %v, want refused by hold 1 with a RetryAfter", r3, err)
	}
	if d, _ := l.Peek(ctx, "tenant:7:tokens", tokens.Rule); d.Remaining != 100 {
		t.Fatalf("tokens after the refusal: %d remaining, want 100 (the refused reservation's 50 given back)", d.Remaining)
	}
	if _, err := r3.Commit(ctx, 1, 1); !errors.Is(err, sluice.ErrNoReservation) {
		t.Fatalf("commit of a refused reservation: %v", err)
	}
	// #1 used 200 tokens and $4: 400 tokens and $26 back
	d, err := r.Commit(ctx, 200, 4_000_000)
	if err != nil || !d.Allowed || d.Remaining != 500 {
		t.Fatalf("commit 200 tokens, $4: %+v %v, want 500 tokens left (the binding budget)", d, err)
	}
	if _, err := r.Commit(ctx, 200, 4_000_000); !errors.Is(err, sluice.ErrNoReservation) {
		t.Fatalf("commit twice: %v", err)
	}
	// #2 extends its tokens by 100 and runs past its reservation by 50: charged
	if d, err := r2.Holds[0].Extend(ctx, 100); err != nil || !d.Allowed || r2.Holds[0].Held != 400 {
		t.Fatalf("extend: %+v %v, held %d", d, err, r2.Holds[0].Held)
	}
	if d, err := r2.Commit(ctx, 450, 25_000_000); err != nil || d.Remaining != 350 {
		t.Fatalf("commit 450 of 400 tokens: %+v %v, want 350 tokens left", d, err)
	}
	// a reservation that is never committed costs what it held after its TTL
	r4, err := l.Reserve(ctx, "tenant:7:tokens", sluice.Budget{Rule: tokens.Rule, Mode: sluice.Strict, TTL: time.Second}, 300)
	if err != nil || !r4.Decision.Allowed {
		t.Fatal(r4, err)
	}
	clock.Advance(time.Second)
	if _, err := r4.Cancel(ctx); !errors.Is(err, sluice.ErrNoReservation) {
		t.Fatalf("cancel after the TTL: %v", err)
	}
	if d, _ := l.Peek(ctx, "tenant:7:tokens", tokens.Rule); d.Remaining != 50 {
		t.Fatalf("after the expiry: %d tokens left, want 50 (it cost its 300)", d.Remaining)
	}
}

// TestReserveBadInput: bad holds are errors naming the field, and nothing stays held.
func TestReserveBadInput(t *testing.T) {
	l, _ := newLimiter(t)
	ctx := context.Background()
	b := sluice.Budget{Rule: sluice.FixedWindow(100, time.Minute)}
	for _, c := range []struct {
		name, field string
		holds       []sluice.Hold
	}{
		{"none", "holds", nil},
		{"negative", "estimate", []sluice.Hold{{Key: "a", Budget: b, N: -1}}},
		{"huge", "estimate", []sluice.Hold{{Key: "a", Budget: b, N: sluice.MaxLimit + 1}}},
		{"one key twice", "key", []sluice.Hold{{Key: "a", Budget: b, N: 1}, {Key: "a", Budget: b, N: 1}}},
		{"ttl", "ttl", []sluice.Hold{{Key: "a", Budget: sluice.Budget{Rule: b.Rule, TTL: time.Hour}, N: 1}}},
		{"second bad", "limit", []sluice.Hold{{Key: "a", Budget: b, N: 10}, {Key: "b", Budget: sluice.Budget{Rule: sluice.FixedWindow(0, time.Minute)}, N: 1}}},
	} {
		_, err := l.ReserveAll(ctx, c.holds)
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want a FieldError naming %q", c.name, err, c.field)
		}
	}
	if d, _ := l.Peek(ctx, "a", b.Rule); d.Remaining != 100 {
		t.Fatalf("after bad input: %d left, want 100", d.Remaining)
	}
	rs, err := l.ReserveAll(ctx, []sluice.Hold{{Key: "a", Budget: b, N: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Commit(ctx, 1, 2); err == nil {
		t.Fatal("two costs for one hold: no error")
	}
	if _, err := rs.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Holds[0].Extend(ctx, 1); !errors.Is(err, sluice.ErrNoReservation) {
		t.Fatalf("extend after the cancel: %v", err)
	}
}

// A budget of LLM tokens: reserve the request's most (max_tokens plus the prompt) before the
// call, commit what the response used after it. Concurrent requests never all pass on the
// same tokens left.
func ExampleLimiter_Reserve() {
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store, _ := memory.New(memory.WithClock(clock)) // omit WithClock outside tests
	defer store.Close()
	limiter := sluice.New(store)
	ctx := context.Background()
	tokens := sluice.Budget{Rule: sluice.FixedWindow(10_000, time.Minute), Mode: sluice.Strict}

	r, err := limiter.Reserve(ctx, "tenant:7", tokens, 4_096)
	if err != nil || !r.Decision.Allowed {
		fmt.Println("refused", err) // 429, Retry-After: r.Decision.RetryAfter
		return
	}
	fmt.Println("reserved", r.Held, "of the", r.Decision.Remaining, "left") // RateLimit: r=10000
	// ... the call to the model; its response used 1,200 tokens
	d, err := r.Commit(ctx, 1_200)
	fmt.Println("committed, remaining", d.Remaining, err)
	// Output:
	// reserved 4096 of the 10000 left
	// committed, remaining 8800 <nil>
}
