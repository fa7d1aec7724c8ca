package algorithm_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// pacedShare is the rule of docs/ALGORITHMS.md (criticality), computed apart from the code: in a
// fixed window of period p, a class of share s may use, at elapsed e into the window,
// floor(s x min(p, (floor(e/1ms)+1) x 1ms + floor(p/16/1ms) x 1ms) / p) units.
func pacedShare(share, period, elapsed int64) int64 {
	ms := int64(time.Millisecond)
	begun := min(period, (elapsed/ms+1)*ms+period/16/ms*ms)
	q := new(big.Int).Mul(big.NewInt(share), big.NewInt(begun))
	return q.Quo(q, big.NewInt(period)).Int64()
}

// TestPropertyCriticalityPace: in random traffic mixes (random classes, costs, overloads and
// arrival gaps) on a fixed window, every class below CRITICAL_PLUS is admitted exactly while
// the window's count stays within its paced share (a lower class never takes more than its
// share of what the window has let through so far, and a class is never refused while its
// paced share has room), so within each window the critical classes are admitted at least
// min(their demand, their paced share left by the classes below); a refusal's RetryAfter is
// the first instant the request fits.
func TestPropertyCriticalityPace(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 23))
		r := sluice.FixedWindow(1+rng.Int64N(1000), time.Duration(1+rng.Int64N(5000))*time.Millisecond)
		if rng.IntN(4) == 0 {
			r.Period = time.Duration(1+rng.Int64N(366*24)) * time.Hour
		}
		s, p := algorithm.New(r.Algorithm), algorithm.Compile(r)
		period, capacity := int64(r.Period), r.Capacity()
		mix := [4]float64{rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64()}
		now := int64(1_700_000_000_000_000_000) + rng.Int64N(period)
		var window, count int64 = -1, 0
		for i := 0; i < 3000; i++ {
			now += rng.Int64N(2*period/(1+capacity*int64(1+rng.IntN(4)))/2 + 1)
			c := drawMix(rng, mix)
			n := int64(1)
			if rng.IntN(6) == 0 {
				n = 1 + rng.Int64N(max(1, capacity/4))
			}
			holdback := sluice.DefaultShares.Holdback(c, capacity)
			if w := algorithm.WindowIndex(now, period); w != window {
				window, count = w, 0
			}
			elapsed := now - window*period
			room := capacity
			if holdback > 0 {
				room = min(capacity-holdback, pacedShare(capacity-holdback, period, elapsed))
			}
			what := fmt.Sprintf("seed %d step %d %s: %d units of %v at +%v, count %d, room %d", seed, i, r, n, c, time.Duration(elapsed), count, room)
			before := *s.(*algorithm.FixedWindow)
			d := algorithm.TakeHoldback(s, now, &p, n, holdback)
			if want := count+n <= room; d.Allowed != want {
				t.Fatalf("%s: allowed %v, want %v: %+v", what, d.Allowed, want, d)
			}
			if d.Allowed {
				count += n
				if d.Remaining != room-count {
					t.Fatalf("%s: remaining %d, want %d", what, d.Remaining, room-count)
				}
				continue
			}
			if n > capacity-holdback {
				if d.RetryAfter != sluice.Never {
					t.Fatalf("%s: %+v, want never", what, d)
				}
				continue
			}
			checkPaceRetry(t, what, before, &p, now, n, holdback, d.RetryAfter)
		}
	}
}

// checkPaceRetry checks a refusal's RetryAfter on copies of the state it was refused on: the
// request is admitted at now + retry and not one millisecond (the pace's step) before.
func checkPaceRetry(t *testing.T, what string, st algorithm.FixedWindow, p *algorithm.Params, now, n, holdback int64, retry time.Duration) {
	t.Helper()
	if retry <= 0 {
		t.Fatalf("%s: refused with retry after %v", what, retry)
	}
	at := now + int64(retry)
	if d := algorithm.TakeHoldback(new(st), at, p, n, holdback); !d.Allowed {
		t.Fatalf("%s: refused again at its retry after %v: %+v", what, retry, d)
	}
	if retry > time.Millisecond {
		if d := algorithm.TakeHoldback(new(st), at-int64(time.Millisecond), p, n, holdback); d.Allowed {
			t.Fatalf("%s: admitted 1ms before its retry after %v", what, retry)
		}
	}
}

func drawMix(rng *rand.Rand, mix [4]float64) sluice.Criticality {
	u := rng.Float64() * (mix[0] + mix[1] + mix[2] + mix[3])
	for i, c := range sluice.Criticalities() {
		if u < mix[i] {
			return c
		}
		u -= mix[i]
	}
	return sluice.Sheddable
}
