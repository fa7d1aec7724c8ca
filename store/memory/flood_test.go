package memory_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// TestKeyFlood (issue 16, item 8): a flood of unique keys, ten times the store's max keys in
// CI (a hundred times under SLUICE_CHAOS: 1M keys), keeps the live heap at what max keys
// cost, and a hot key decided among the flood is still limited.
func TestKeyFlood(t *testing.T) {
	const maxKeys = 10_000
	flood := 10 * maxKeys
	if testenv.Chaos() {
		flood = 100 * maxKeys
	}
	clock := sluicetest.NewManualClock(time.Unix(1_700_000_000, 0))
	s, err := memory.New(memory.WithMaxKeys(maxKeys), memory.WithClock(clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	cold := sluice.FixedWindow(10, time.Minute)
	hot := sluice.TokenBucket(100, time.Hour, 100)
	var admitted, asked int64
	take := func(i int) {
		if _, err := s.Take(ctx, sluice.Request{Key: "flood:" + strconv.Itoa(i), Rule: cold, N: 1}); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			takeHot(t, s, clock, hot, &asked, &admitted)
		}
	}
	base := testenv.LiveHeap()
	for i := range maxKeys {
		take(i)
	}
	full := testenv.LiveHeap()
	for i := maxKeys; i < flood; i++ {
		take(i)
	}
	after := testenv.LiveHeap()
	perKey := float64(full-min(base, full)) / maxKeys
	t.Logf("%d unique keys, max keys %d: %d held, %d evicted; live heap +%.1f MB at max keys (%.0f B/key), +%.1f MB after the flood; hot key %d of %d admitted (limit %d)",
		flood, maxKeys, s.Len(), s.Evictions(), testenv.MiB(full-min(base, full)), perKey, testenv.MiB(after-min(base, after)), admitted, asked, hot.Limit)
	if s.Len() > maxKeys {
		t.Errorf("%d keys held, max %d", s.Len(), maxKeys)
	}
	if after > full+full/4+1<<20 {
		t.Errorf("live heap grew from %.1f MB at max keys to %.1f MB after %d keys", testenv.MiB(full), testenv.MiB(after), flood)
	}
	if admitted != hot.Limit {
		t.Errorf("hot key: %d admitted of %d asked, want its limit %d (evicted by the flood?)", admitted, asked, hot.Limit)
	}
}

// takeHot takes one unit of the key "hot" under rule, counting it in asked and admitted, and
// advances the clock a millisecond.
func takeHot(t *testing.T, s *memory.Store, clock *sluicetest.ManualClock, rule sluice.Rule, asked, admitted *int64) {
	t.Helper()
	d, err := s.Take(context.Background(), sluice.Request{Key: "hot", Rule: rule, N: 1})
	if err != nil {
		t.Fatal(err)
	}
	*asked++
	if d.Allowed {
		*admitted++
	}
	clock.Advance(time.Millisecond)
}
