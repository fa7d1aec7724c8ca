package algorithm

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// checkRatio checks r.floor(x) and r.ceil(x) against exact arithmetic: floor(x*num/den) and
// ceil(x*num/den), or math.MaxInt64 when that does not fit in an int64.
func checkRatio(t *testing.T, num, den, x int64) {
	t.Helper()
	r := newRatio(num, den)
	prod := new(big.Int).Mul(big.NewInt(x), big.NewInt(num))
	fl, rem := new(big.Int).QuoRem(prod, big.NewInt(den), new(big.Int))
	ce := new(big.Int).Set(fl)
	if rem.Sign() != 0 {
		ce.Add(ce, big.NewInt(1))
	}
	want := func(v *big.Int) int64 {
		if v.IsInt64() {
			return v.Int64()
		}
		return math.MaxInt64
	}
	if got := r.floor(x); got != want(fl) {
		t.Fatalf("floor(%d*%d/%d) = %d, want %s", x, num, den, got, fl)
	}
	if got := r.ceil(x); got != want(ce) {
		t.Fatalf("ceil(%d*%d/%d) = %d, want %s", x, num, den, got, ce)
	}
}

// edgy returns a random value in [0, 2^62] drawn to hit the edges of the arithmetic: small
// numbers, powers of two and their neighbours, multiples of powers of ten.
func edgy(rng *rand.Rand) int64 {
	switch rng.IntN(4) {
	case 0:
		return rng.Int64N(1 << (1 + rng.IntN(62)))
	case 1:
		return max(0, int64(1)<<rng.IntN(63)+rng.Int64N(5)-2)
	case 2:
		p := int64(1)
		for range rng.IntN(19) {
			p *= 10
		}
		return p * (1 + rng.Int64N(9))
	}
	return rng.Int64N(1000)
}

func TestRatioExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 400000; i++ {
		num, den, x := edgy(rng), max(1, edgy(rng)), edgy(rng)
		if i%2 == 0 { // the ratios the buckets use: fixed-point rates over periods
			num = (1 + rng.Int64N(sluice.MaxLimit)) * Scale
			den = 1 + rng.Int64N(int64(sluice.MaxPeriod))
			if rng.IntN(2) == 0 {
				num, den = den, num
			}
		}
		checkRatio(t, num, den, x)
	}
	for _, c := range [][3]int64{{3, 1, 0}, {1, 3, 3}, {1_000_000_000, 3_000_000_000, 2_999_999_999},
		{math.MaxInt64, 1, 1}, {math.MaxInt64, 1, 2}, {1, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64 - 1, math.MaxInt64, math.MaxInt64}, {math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - 1},
		{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64}, {1 << 62, 3, 1}, {1 << 62, 3, 2}, {1, 1 << 62, 1 << 62},
		{0, 7, math.MaxInt64}, {7, 7, math.MaxInt64}} {
		checkRatio(t, c[0], c[1], c[2])
	}
}

// FuzzRatio: floor and ceil are exact for any num >= 0, den > 0 and x >= 0.
func FuzzRatio(f *testing.F) {
	f.Add(int64(1_000_000_000), int64(3_000_000_000), int64(2_999_999_999))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64-1), int64(math.MaxInt64-1))
	f.Fuzz(func(t *testing.T, num, den, x int64) {
		if num < 0 || den <= 0 || x < 0 {
			return
		}
		checkRatio(t, num, den, x)
	})
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
