package algorithm_test

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

func TestDrains(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		want := a == sluice.AlgorithmTokenBucket || a == sluice.AlgorithmLeakyBucket || a == sluice.AlgorithmGCRA
		if got := algorithm.Drains(sluice.Rule{Algorithm: a, Limit: 1, Period: time.Second}); got != want {
			t.Errorf("Drains(%v) = %v, want %v", a, got, want)
		}
	}
}

// Refilled is floor(Limit x (t1-t0) / Period), exactly, and 0 when the clock stands or went
// back.
func TestRefilled(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 3))
	for range 20_000 {
		limit := 1 + rng.Int64N(sluice.MaxLimit)
		period := time.Duration(1+rng.Int64N(int64(sluice.MaxPeriod/time.Millisecond))) * time.Millisecond
		p := algorithm.Compile(sluice.TokenBucket(limit, period, 0))
		t0 := rng.Int64N(1 << 62)
		d := rng.Int64N(int64(period) * (1 + rng.Int64N(3)))
		want := new(big.Int).Mul(big.NewInt(limit), big.NewInt(d))
		want.Quo(want, big.NewInt(int64(period)))
		if got := p.Refilled(t0, t0+d); got != want.Int64() {
			t.Fatalf("Refilled over %d ns of %d per %v = %d, want %d", d, limit, period, got, want)
		}
		if got := p.Refilled(t0, t0-d); got != 0 {
			t.Fatalf("Refilled backwards = %d, want 0", got)
		}
	}
}

// Holds answers what a token bucket reports: charged held units at t0, at t1 it holds
// Capacity - Remaining of them.
func TestHoldsIsTheBucketLevel(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 4))
	for range 20_000 {
		limit := 1 + rng.Int64N(1000)
		period := time.Duration(1+rng.Int64N(60_000)) * time.Millisecond
		r := sluice.TokenBucket(limit, period, rng.Int64N(2*limit))
		p := algorithm.Compile(r)
		held := rng.Int64N(r.Capacity() + 1)
		t0 := time.Unix(1_700_000_000, 0).UnixNano()
		t1 := t0 + rng.Int64N(2*int64(period))
		var b algorithm.TokenBucket
		if d := b.Take(t0, &p, held, 0); !d.Allowed {
			t.Fatalf("take %d of %v: %+v", held, r, d)
		}
		d := b.Take(t1, &p, 0, 0)
		if got, want := p.Holds(held, t0, t1), d.Capacity-d.Remaining; got != want {
			t.Fatalf("Holds(%d) after %v of %v = %d, the bucket holds %d", held, time.Duration(t1-t0), r, got, want)
		}
	}
}
