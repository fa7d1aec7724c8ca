package hotkey

import "hash/maphash"

// countMin is a Count-Min sketch (Cormode, Muthukrishnan 2005): depth rows of width
// counters. Its estimate of a value is never below the value's true count, and above it by
// at most e x total / width with probability 1 - e^-depth, so it bounds the values the
// Space-Saving sketch does not hold far more tightly than its min. Not safe for concurrent
// use.
type countMin struct {
	seed maphash.Seed
	mask uint64
	rows [countMinDepth][]uint32
}

const countMinDepth = 4

func newCountMin(width int, seed maphash.Seed) *countMin {
	w := 1
	for w < width {
		w <<= 1
	}
	c := &countMin{seed: seed, mask: uint64(w - 1)}
	for i := range c.rows {
		c.rows[i] = make([]uint32, w)
	}
	return c
}

// index is the counter of value in row i, from one 64-bit hash split in two (Kirsch and
// Mitzenmacher's double hashing).
func (c *countMin) index(h uint64, i int) uint64 {
	return (h + uint64(i)*((h>>32)|1)) & c.mask
}

// add counts n for value and returns the estimate after it.
func (c *countMin) add(value string, n int64) int64 {
	h := maphash.String(c.seed, value)
	est := int64(-1)
	for i := range c.rows {
		p := &c.rows[i][c.index(h, i)]
		*p = uint32(min(int64(*p)+n, 1<<32-1))
		if v := int64(*p); est < 0 || v < est {
			est = v
		}
	}
	return est
}

// estimate is an upper bound of value's count.
func (c *countMin) estimate(value string) int64 {
	h := maphash.String(c.seed, value)
	est := int64(-1)
	for i := range c.rows {
		if v := int64(c.rows[i][c.index(h, i)]); est < 0 || v < est {
			est = v
		}
	}
	return est
}

func (c *countMin) reset() {
	for i := range c.rows {
		clear(c.rows[i])
	}
}
