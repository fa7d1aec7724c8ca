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
	q, rem, ok := r.divide(x)
	if !ok {
		return math.MaxInt64
	}
	_ = rem
	return q
}

// ceil returns ceil(x*num/den) for x >= 0, saturating at math.MaxInt64.
func (r *ratio) ceil(x int64) int64 {
	q, rem, ok := r.divide(x)
	if !ok || (rem != 0 && q == math.MaxInt64) {
		return math.MaxInt64
	}
	if rem != 0 {
		q++
	}
	return q
}

// divide returns the quotient and remainder of x*num/den: an estimate from the whole and
// fractional parts (at most one too small), corrected with one 128-bit product. ok is false
// when the quotient does not fit in an int64.
func (r *ratio) divide(x int64) (q int64, rem uint64, ok bool) {
	ux := uint64(x)
	hiW, uq := bits.Mul64(ux, r.whole)
	if hiW != 0 {
		return 0, 0, false
	}
	fr, _ := bits.Mul64(ux, r.frac)
	uq, carry := bits.Add64(uq, fr, 0)
	if carry != 0 || uq > math.MaxInt64 {
		return 0, 0, false
	}
	// rem = x*num - uq*den, in 128 bits; it is below 2*den.
	xh, xl := bits.Mul64(ux, r.num)
	ph, pl := bits.Mul64(uq, r.den)
	lo, borrow := bits.Sub64(xl, pl, 0)
	hi, _ := bits.Sub64(xh, ph, borrow)
	if hi != 0 || lo >= r.den {
		if uq == math.MaxInt64 {
			return 0, 0, false
		}
		uq++
		lo -= r.den // hi:lo < 2*den, so the result fits in 64 bits
	}
	return int64(uq), lo, true
}
