package algorithm_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/fastpath"
)

// scalar is a state the memory store decides through TakeScalar.
type scalar interface {
	algorithm.State
	TakeScalar(fastpath.Token, int64, *algorithm.Params, int64) (bool, int64, int64, int64)
}

// TestAllowIsTake checks the memory store's fast path against the general one: for the bucket
// algorithms and GCRA, TakeScalar (a path of its own, without waits) gives the decision
// and leaves the state that Take with no delay gives and leaves, on random and extreme rules,
// from states left by takes, waits, refunds, debts and clocks that jump both ways.
func TestAllowIsTake(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 5))
	tok := fastpath.Token{}
	for _, a := range []sluice.Algorithm{sluice.AlgorithmTokenBucket, sluice.AlgorithmLeakyBucket, sluice.AlgorithmGCRA} {
		for round := range 3000 {
			r := randomRule(rng, a)
			if round%2 == 1 {
				r = extremeRule(rng, a)
			}
			p := algorithm.Compile(r)
			st := algorithm.New(a)
			now := int64(1_700_000_000_000_000_000) + rng.Int64N(int64(time.Hour))
			for step := range 60 {
				switch rng.IntN(8) {
				case 0:
					now += rng.Int64N(2 * int64(r.Period))
				case 1:
					now -= rng.Int64N(int64(r.Period))
				case 2:
					now += rng.Int64N(int64(r.Period)/max(1, r.Limit) + 1)
				}
				// The step's request: mostly small takes, sometimes refunds, more than the
				// capacity, or a whole burst.
				ns := []int64{1, 1, 1, 2, 0, -1, -rng.Int64N(r.Capacity() + 2), r.Capacity(), r.Capacity() + 1, 1 + rng.Int64N(r.Capacity())}
				n := ns[rng.IntN(len(ns))]
				fast, slow := clone(st, r, now).(scalar), clone(st, r, now)
				allowed, remaining, retry, reset := fast.TakeScalar(tok, now, &p, n)
				want := slow.Take(now, &p, n, 0)
				got := sluice.Decision{Allowed: allowed, Capacity: r.Capacity(), Remaining: remaining,
					RetryAfter: time.Duration(retry), ResetAfter: time.Duration(reset)}
				if retry == -1 {
					got.RetryAfter = sluice.Never
				}
				if got != want {
					t.Fatalf("%s step %d, n=%d at %d: TakeScalar %+v, Take %+v", r, step, n, now, got, want)
				}
				if g, w := algorithm.AppendState(nil, fast), algorithm.AppendState(nil, slow); string(g) != string(w) {
					t.Fatalf("%s step %d, n=%d at %d: TakeScalar left %x, Take %x", r, step, n, now, g, w)
				}
				// Move the state on: the decision just checked, a wait or a settle
				// (debts and refunds up to the int64 edges).
				switch rng.IntN(6) {
				case 0:
					st.Take(now, &p, 1+rng.Int64N(r.Capacity()), rng.Int64N(2*int64(r.Period)))
				case 1:
					st.Settle(now, &p, extremeN(rng, r))
				case 2:
					st.Settle(now, &p, rng.Int64N(3*r.Capacity())-r.Capacity())
				default:
					st = slow
				}
			}
		}
	}
}
