package algorithm

import (
	"math"
	"math/bits"
)

// ratio multiplies by num/den exactly without dividing on the hot path: it keeps num/den as a
// whole part and a 64-bit binary fraction (rounded down), estimates x*num/den with two
// multiplications, and corrects the estimate, which is at most one too small, with a 128-bit
// comparison. Compile builds ratios once per rule.
type ratio struct {
	num, den    uint64
	whole, frac uint64 // num/den = whole + frac/2^64 - epsilon
}

func newRatio(num, den int64) ratio {
	r := ratio{num: uint64(num), den: uint64(den), whole: uint64(num / den)}
	r.frac, _ = bits.Div64(uint64(num%den), 0, uint64(den))
	return r
}

// floor returns floor(x*num/den) for x >= 0, saturating at math.MaxInt64.
func (r *ratio) floor(x int64) int64 {
	ux := uint64(x)
	hiW, q := bits.Mul64(ux, r.whole)
	if hiW != 0 {
		return math.MaxInt64
	}
	fr, _ := bits.Mul64(ux, r.frac)
	q, carry := bits.Add64(q, fr, 0)
	if carry != 0 || q >= math.MaxInt64 {
		return math.MaxInt64
	}
	// q is floor(x*num/den) or one less: take q+1 if (q+1)*den <= x*num.
	ph, pl := bits.Mul64(q+1, r.den)
	xh, xl := bits.Mul64(ux, r.num)
	if ph < xh || (ph == xh && pl <= xl) {
		q++
	}
	return int64(q)
}

// ceil returns ceil(x*num/den) for x >= 0, saturating at math.MaxInt64.
func (r *ratio) ceil(x int64) int64 {
	q := r.floor(x)
	if q == math.MaxInt64 {
		return q
	}
	ph, pl := bits.Mul64(uint64(q), r.den)
	xh, xl := bits.Mul64(uint64(x), r.num)
	if ph < xh || (ph == xh && pl < xl) {
		q++
	}
	return q
}
