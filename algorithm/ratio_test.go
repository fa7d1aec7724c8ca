package algorithm

import (
	"math/big"
	"math/rand/v2"
	"testing"
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
