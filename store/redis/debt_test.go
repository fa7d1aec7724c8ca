package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestDebtTTL (issue 31, item 6): the largest settle on a key of an hourly rule, on Redis's own
// clock, leaves the key a TTL no longer than its debt takes to pay plus its capacity to refill
// (storetest.DebtBounds: at most 3 hours here) and SLACK; a settle once kept a request rule's
// key for 367 days.
func TestDebtTTL(t *testing.T) {
	c := standalone(t)
	s := newStore(t, c)
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		r := storetest.DebtRule(a, time.Hour)
		_, full := storetest.DebtBounds(r)
		key := "debt:" + a.String()
		d, err := s.Take(ctx, sluice.Request{Key: key, Rule: r, N: sluice.MaxLimit, Settle: true})
		if err != nil {
			t.Fatal(err)
		}
		ttl, err := c.PTTL(ctx, s.Key(key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: settle %d: %+v; PTTL %v", r, int64(sluice.MaxLimit), d, ttl)
		if ttl <= 0 || ttl > full+time.Second { // SLACK: 1 s (store/redis/lua/prelude.lua)
			t.Errorf("%s: PTTL %v after the largest settle, want at most %v", r, ttl, full+time.Second)
		}
	}
}
