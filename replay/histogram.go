package replay

import "math/bits"

// histogram counts values (per-client rates, in units per period) in bounded memory: exactly
// below exactBelow, and above in 128 buckets per power of two (each value read back as its
// bucket's least value, within 0.8% below the true one).
type histogram struct {
	counts []int64
	total  int64
	max    int64
}

const (
	exactBelow = 1024
	subBuckets = 128 // per power of two above exactBelow
)

// bucket returns the bucket of v (v >= 0).
func bucket(v int64) int {
	if v < exactBelow {
		return int(v)
	}
	e := 63 - bits.LeadingZeros64(uint64(v)) // 2^e <= v < 2^(e+1), e >= 10
	return exactBelow + (e-10)*subBuckets + int((v>>(e-7))&(subBuckets-1))
}

// lowest returns the least value of bucket b.
func lowest(b int) int64 {
	if b < exactBelow {
		return int64(b)
	}
	e := (b-exactBelow)/subBuckets + 10
	return (int64(subBuckets) + int64((b-exactBelow)%subBuckets)) << (e - 7)
}

func (h *histogram) add(v int64, n int64) {
	b := bucket(max(v, 0))
	if b >= len(h.counts) {
		h.counts = append(h.counts, make([]int64, b+1-len(h.counts))...)
	}
	h.counts[b] += n
	h.total += n
	h.max = max(h.max, v)
}

func (h *histogram) merge(o *histogram) {
	for b, n := range o.counts {
		if n != 0 {
			if b >= len(h.counts) {
				h.counts = append(h.counts, make([]int64, b+1-len(h.counts))...)
			}
			h.counts[b] += n
		}
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}

// quantile returns the value at quantile q (0 < q <= 1): the least value v such that at
// least q of the values are at most v (read back as its bucket's least value).
func (h *histogram) quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	rank := int64(q*float64(h.total) + 0.999999999)
	rank = min(max(rank, 1), h.total)
	var seen int64
	for b, n := range h.counts {
		seen += n
		if seen >= rank {
			if b == bucket(h.max) {
				return min(lowest(b), h.max)
			}
			return lowest(b)
		}
	}
	return h.max
}
