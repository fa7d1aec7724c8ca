package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/redis"
)

// TestAlgorithmSwitchKeepsTTL: a key moved from one algorithm to another at the same instant
// keeps a TTL. A script that deletes another algorithm's state must not reuse that state's
// recorded expiry: SET KEEPTTL on the deleted key would write it with none. (A fixed window of
// one second then GCRA at one per second did that: the window's expiry fell in GCRA's range
// for KEEPTTL.) Every ordered pair of algorithms, through single and batched calls; the keys'
// TTLs are checked when the test ends (newStore).
func TestAlgorithmSwitchKeepsTTL(t *testing.T) {
	ctx := context.Background()
	for _, batched := range []bool{false, true} {
		clock := sluicetest.NewManualClock(t0.Add(250 * time.Millisecond))
		s := newStore(t, standalone(t), redis.WithClock(clock))
		for _, a := range sluice.Algorithms() {
			for _, b := range sluice.Algorithms() {
				if a == b {
					continue
				}
				key := a.String() + ">" + b.String()
				reqs := []sluice.Request{
					{Key: key, Rule: sluice.Rule{Algorithm: a, Limit: 10, Period: time.Second}, N: 1},
					{Key: key, Rule: sluice.Rule{Algorithm: b, Limit: 1, Period: time.Second}, N: 1},
				}
				for i, req := range reqs {
					var err error
					if batched { // with a second key, so that the call is a batched one
						other := req
						other.Key += ":other"
						_, errs := redis.TakeBatch(ctx, s, 2, func(j int) sluice.Request { return []sluice.Request{req, other}[j] })
						err = errs[0]
					} else {
						_, err = s.Take(ctx, req)
					}
					if err != nil {
						t.Fatalf("%s, call %d: %v", key, i, err)
					}
				}
			}
		}
	}
	// newStore's cleanup fails the test for every key of its prefix left without a TTL.
}
