package memory

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/fastpath"
)

// TestFastPath checks that sluice.Limiter finds the memory store's TakeLocal (the store is a
// fastpath.Local, the interface sluice's localStore names), and that TakeLocal decides as
// Take does.
func TestFastPath(t *testing.T) {
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !fastpath.IsLocal[sluice.Rule](s) {
		t.Fatalf("*Store is not a fastpath.Local")
	}
	if fastpath.IsLocal[sluice.Rule](sluice.Store(nil)) {
		t.Error("a nil store is a fastpath.Local")
	}
	var l fastpath.Local[sluice.Rule] = s
	for _, a := range sluice.Algorithms() {
		rule := sluice.Rule{Algorithm: a, Limit: 3, Period: time.Hour}
		for i := 0; i < 5; i++ {
			want, err := s.Take(context.Background(), sluice.Request{Key: "take:" + a.String(), Rule: rule, N: 1})
			if err != nil {
				t.Fatal(err)
			}
			allowed, remaining, retry, reset, err := l.TakeLocal(fastpath.Token{}, "local:"+a.String(), rule, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := sluice.Decision{Allowed: allowed, Capacity: rule.Capacity(), Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
			// The two keys decide a few ns apart: compare all but the durations exactly.
			if got.Allowed != want.Allowed || got.Capacity != want.Capacity || got.Remaining != want.Remaining ||
				(got.RetryAfter > 0) != (want.RetryAfter > 0) || (got.ResetAfter > 0) != (want.ResetAfter > 0) {
				t.Fatalf("%s step %d: TakeLocal %+v, Take %+v", a, i, got, want)
			}
		}
	}
	if _, _, _, _, err := l.TakeLocal(fastpath.Token{}, "", sluice.GCRA(1, time.Second, 0), 1); err == nil {
		t.Error("TakeLocal accepted an empty key")
	}
}
