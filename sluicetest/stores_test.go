package sluicetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

var (
	_ sluice.Store           = (*sluicetest.CountingStore)(nil)
	_ sluicetest.SharedStore = (*sluicetest.FlakyStore)(nil)
	_ sluicetest.SharedStore = (*memory.Store)(nil)
	_ sluice.Store           = sluicetest.TimingOutStore{}
	_ sluice.Store           = (*sluicetest.GateStore)(nil)
)

var rule = sluice.FixedWindow(2, time.Minute)

func newMemory(t *testing.T) *memory.Store {
	t.Helper()
	m, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestCountingStore(t *testing.T) {
	c := &sluicetest.CountingStore{Store: newMemory(t)}
	ctx := context.Background()
	for i := range 3 {
		d, err := c.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1})
		if err != nil || d.Allowed != (i < 2) {
			t.Fatalf("take %d: %+v %v", i, d, err)
		}
	}
	if got := c.Calls(); got != 3 {
		t.Fatalf("Calls = %d, want 3", got)
	}
}

func TestFlakyStore(t *testing.T) {
	f := sluicetest.NewFlakyStore(newMemory(t))
	ctx := context.Background()
	req := sluice.Request{Key: "k", Rule: rule, N: 1}
	if d, err := f.Take(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("answering: %+v %v", d, err)
	}
	f.SetFailing(true)
	if _, err := f.Take(ctx, req); !errors.Is(err, sluice.ErrStoreUnavailable) {
		t.Fatalf("failing Take: %v, want ErrStoreUnavailable", err)
	}
	if err := f.AddWindowCounts(ctx, nil); !errors.Is(err, sluice.ErrStoreUnavailable) {
		t.Fatalf("failing AddWindowCounts: %v, want ErrStoreUnavailable", err)
	}
	if _, err := f.Heartbeat(ctx, "g", "i", time.Second); !errors.Is(err, sluice.ErrStoreUnavailable) {
		t.Fatalf("failing Heartbeat: %v, want ErrStoreUnavailable", err)
	}
	f.SetFailing(false)
	f.SetHanging(true)
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := f.Take(tctx, req); !errors.Is(err, sluice.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging Take: %v, want ErrStoreUnavailable and the context's deadline", err)
	}
	f.SetHanging(false)
	if d, err := f.Take(ctx, req); err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("answering again: %+v %v, want the second unit", d, err)
	}
	f.Replace(newMemory(t)) // restarted empty
	if d, err := f.Take(ctx, req); err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after Replace: %+v %v, want a fresh key", d, err)
	}
	if n, err := f.Heartbeat(ctx, "g", "i", time.Second); err != nil || n != 1 {
		t.Fatalf("Heartbeat: %d %v", n, err)
	}
	if got := f.Calls(); got != 8 {
		t.Fatalf("Calls = %d, want 8", got)
	}
}

func TestTimingOutStore(t *testing.T) {
	ctx := context.Background()
	_, err := sluicetest.TimingOutStore{}.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1})
	if !errors.Is(err, sluice.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Take: %v, want ErrStoreUnavailable and DeadlineExceeded", err)
	}
	s := sluicetest.TimingOutStore{Hang: func(req sluice.Request) bool { return req.Key == "slow" }}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := s.Take(tctx, sluice.Request{Key: "slow", Rule: rule, N: 1}); err != context.DeadlineExceeded {
		t.Fatalf("hanging Take: %v, want the caller's deadline", err)
	}
}

func TestGateStore(t *testing.T) {
	g := sluicetest.NewGateStore(newMemory(t))
	ctx := context.Background()
	req := sluice.Request{Key: "k", Rule: rule, N: 1}
	done := make(chan error, 1)
	go func() {
		_, err := g.Take(ctx, req)
		done <- err
	}()
	<-g.Entered()
	select {
	case err := <-done:
		t.Fatalf("Take passed a closed gate: %v", err)
	case <-time.After(10 * time.Millisecond):
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	go func() { <-g.Entered() }()
	if _, err := g.Take(tctx, req); err != context.DeadlineExceeded {
		t.Fatalf("Take whose context ends at the gate: %v", err)
	}
	g.Release()
	if err := <-done; err != nil {
		t.Fatalf("held Take after Release: %v", err)
	}
	g.Release() // twice is fine
	if d, err := g.Take(ctx, req); err != nil || !d.Allowed {
		t.Fatalf("Take after Release: %+v %v", d, err)
	}
}
