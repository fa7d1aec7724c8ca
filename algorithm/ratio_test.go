package algorithm

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestRatioExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(num, den, x int64) {
		r := newRatio(num, den)
		prod := new(big.Int).Mul(big.NewInt(x), big.NewInt(num))
		fl, rem := new(big.Int).QuoRem(prod, big.NewInt(den), new(big.Int))
		ce := new(big.Int).Set(fl)
		if rem.Sign() != 0 {
			ce.Add(ce, big.NewInt(1))
		}
		if fl.IsInt64() {
			if got := r.floor(x); got != fl.Int64() {
				t.Fatalf("floor(%d*%d/%d) = %d, want %s", x, num, den, got, fl)
			}
		}
		if ce.IsInt64() {
			if got := r.ceil(x); got != ce.Int64() {
				t.Fatalf("ceil(%d*%d/%d) = %d, want %s", x, num, den, got, ce)
			}
		}
	}
	for i := 0; i < 200000; i++ {
		num := 1 + rng.Int64N(1<<(1+rng.IntN(62)))
		den := 1 + rng.Int64N(1<<(1+rng.IntN(62)))
		x := rng.Int64N(1 << (1 + rng.IntN(62)))
		check(num, den, x)
	}
	check(3, 1, 0)
	check(1, 3, 3)
	check(1_000_000_000, 3_000_000_000, 2_999_999_999)
}

func TestToleratesTick(t *testing.T) {
	tick := int64(500_000) // 500 µs
	cases := []struct {
		rule sluice.Rule
		want bool
	}{
		{sluice.PerSecond(100), true},                         // 0.05 units per tick, 1% of 100 is 1
		{sluice.GCRA(1_000_000, time.Second, 0), true},        // 500 per tick of 1,000,000
		{sluice.GCRA(10_000, time.Second, 1), false},          // 5 per tick, burst of 1
		{sluice.TokenBucket(10_000, time.Second, 1000), true}, // 5 per tick, 1% of 1000 is 10
		{sluice.FixedWindow(5, 10*time.Millisecond), false},   // the tick is 5% of the window
		{sluice.SlidingLog(1000, 50*time.Millisecond), true},  // exactly 1%
		{sluice.SlidingLog(1000, 49*time.Millisecond), false},
	}
	for _, c := range cases {
		p := Compile(c.rule)
		if got := p.ToleratesTick(tick); got != c.want {
			t.Errorf("%s: ToleratesTick(500µs) = %v, want %v", c.rule, got, c.want)
		}
	}
}
