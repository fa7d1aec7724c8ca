package algorithm

import (
	"math"
	"math/bits"
)

// ratio multiplies by num/den exactly without dividing on the hot path. It keeps num/den as a
// whole part and a 128-bit binary fraction, once rounded down (lo) and once rounded up (hi),
// and computes x*num/den for x >= 0 with three independent multiplications and no correction
// step. Compile builds ratios once per rule.
//
// Why it is exact: let x*num/den = q + r/den with 0 <= r < den. The fraction's rounding moves
// the product by less than x/2^128, which is below 1/den since x and den are below 2^63. So
// the product with the fraction rounded up lies in [q + r/den, q + (r+1)/den), whose floor is
// q; with the fraction rounded down it lies in (q + (r-1)/den, q + r/den], whose ceiling is q
// when r = 0 and q+1 otherwise.
type ratio struct {
	whole    uint64 // floor(num/den)
	dn1, dn2 uint64 // the fraction num/den - whole, rounded down, as dn1/2^64 + dn2/2^128
	up1, up2 uint64 // the same rounded up
}

// newRatio returns the ratio num/den for num >= 0 and den > 0.
func newRatio(num, den int64) ratio {
	r := ratio{whole: uint64(num / den)}
	var rem uint64
	r.dn1, rem = bits.Div64(uint64(num%den), 0, uint64(den))
	r.dn2, rem = bits.Div64(rem, 0, uint64(den))
	r.up1, r.up2 = r.dn1, r.dn2
	if rem != 0 { // the fraction has more bits: round up (it is below 1 - 1/den, so no carry out)
		var c uint64
		r.up2, c = bits.Add64(r.dn2, 1, 0)
		r.up1 += c
	}
	return r
}

// floor returns floor(x*num/den) for x >= 0, saturating at math.MaxInt64.
func (r *ratio) floor(x int64) int64 {
	q, _, ok := r.product(uint64(x), r.up1, r.up2)
	if !ok {
		return math.MaxInt64
	}
	return int64(q)
}

// ceil returns ceil(x*num/den) for x >= 0, saturating at math.MaxInt64.
func (r *ratio) ceil(x int64) int64 {
	q, frac, ok := r.product(uint64(x), r.dn1, r.dn2)
	if frac {
		q++
	}
	if !ok || q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// product returns the integer part of x*(whole + f1/2^64 + f2/2^128), whether its fractional
// part is non-zero, and ok false when the integer part does not fit in an int64.
func (r *ratio) product(x, f1, f2 uint64) (q uint64, frac, ok bool) {
	hw, lw := bits.Mul64(x, r.whole)
	h1, l1 := bits.Mul64(x, f1)
	h2, l2 := bits.Mul64(x, f2)
	mid, c := bits.Add64(l1, h2, 0)
	q, c2 := bits.Add64(lw, h1, c)
	return q, mid|l2 != 0, hw|c2 == 0 && q <= math.MaxInt64
}
