package memory

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/fastpath"
)

// TestFastPath checks that sluice.Limiter finds the memory store's TakeLocal (its signature is
// the one sluice's localStore interface names), and that TakeLocal decides as Take does.
func TestFastPath(t *testing.T) {
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, ok := fastpath.Local(s).(interface {
		TakeLocal(key string, rule sluice.Rule, n int64) (allowed bool, remaining int64, retryAfter, resetAfter time.Duration, err error)
	})
	if !ok {
		t.Fatalf("fastpath.Local(*Store) = %T, without sluice's TakeLocal", fastpath.Local(s))
	}
	if fastpath.Local(sluice.Store(nil)) != nil {
		t.Error("fastpath.Local(nil) is not nil")
	}
	for _, a := range sluice.Algorithms() {
		rule := sluice.Rule{Algorithm: a, Limit: 3, Period: time.Hour}
		for i := 0; i < 5; i++ {
			want, err := s.Take(context.Background(), sluice.Request{Key: "take:" + a.String(), Rule: rule, N: 1})
			if err != nil {
				t.Fatal(err)
			}
			allowed, remaining, retry, reset, err := l.TakeLocal("local:"+a.String(), rule, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := sluice.Decision{Allowed: allowed, Limit: rule.Capacity(), Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
			// The two keys decide a few ns apart: compare all but the durations exactly.
			if got.Allowed != want.Allowed || got.Limit != want.Limit || got.Remaining != want.Remaining ||
				(got.RetryAfter > 0) != (want.RetryAfter > 0) || (got.ResetAfter > 0) != (want.ResetAfter > 0) {
				t.Fatalf("%s step %d: TakeLocal %+v, Take %+v", a, i, got, want)
			}
		}
	}
	if _, _, _, _, err := l.TakeLocal("", sluice.GCRA(1, time.Second, 0), 1); err == nil {
		t.Error("TakeLocal accepted an empty key")
	}
}
