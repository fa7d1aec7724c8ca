package hotkey_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hotkey"
)

// A Batch admits a key cold up to ColdLimit, then charges the store with those admissions
// before the store decides, and records the store's denials in the sketch.
func TestBatch(t *testing.T) {
	rule := sluice.PerMinute(5)
	f := newFleet(t, 1, rule, hotkey.Config{TopK: 8, ColdLimit: 2})
	p, ctx := f.params[0], context.Background()
	steps := []struct {
		cold, allowed bool
		remaining     int64 // in the store, after the request
	}{
		{cold: true, allowed: true},
		{cold: true, allowed: true},
		{allowed: true, remaining: 2}, // charged the 2 cold ones, then took 1
		{allowed: true, remaining: 1},
		{allowed: true, remaining: 0},
		{allowed: false, remaining: 0},
	}
	var b hotkey.Batch
	for i, s := range steps {
		b.Reset()
		var checks []sluice.Check
		v := b.Observe(p, len(checks), "k", 1)
		if v.Cold != s.cold {
			t.Fatalf("step %d: cold %v, want %v", i, v.Cold, s.cold)
		}
		if v.Cold {
			if b.Len() != 0 {
				t.Fatalf("step %d: a cold key kept in the batch", i)
			}
			continue
		}
		checks = append(checks, sluice.Check{Key: "k", Rule: rule, N: 1})
		d, err := b.AllowAll(ctx, f.lim, checks)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != s.allowed || d.Remaining != s.remaining {
			t.Fatalf("step %d: %+v, want allowed %v remaining %d", i, d, s.allowed, s.remaining)
		}
	}
	top, _ := p.Tracker().Top(1)
	if len(top) != 1 || top[0].DeniedRate == 0 {
		t.Errorf("Top = %+v, want k with a denial", top)
	}
}
