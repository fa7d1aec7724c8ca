package hotkey

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestSketchGuarantee checks Space-Saving's guarantee on a Zipf stream against exact counts:
// a held value's count is between its true count and true + err; a value not held was seen
// at most min <= total/k times.
func TestSketchGuarantee(t *testing.T) {
	const k, n = 100, 200_000
	s := newSketch(k, true)
	exact := map[string]int64{}
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, 100_000)
	for range n {
		v := strconv.FormatUint(z.Uint64(), 10)
		exact[v]++
		s.add(v, 1)
	}
	if s.total != n || len(s.heap) != k {
		t.Fatalf("total %d, %d held; want %d, %d", s.total, len(s.heap), n, k)
	}
	min := s.min()
	if min > n/k {
		t.Errorf("min %d above total/k = %d", min, n/k)
	}
	for v, c := range exact {
		e := s.byValue[v]
		switch {
		case e == nil && c > min:
			t.Fatalf("value %s seen %d times, not held, above min %d", v, c, min)
		case e != nil && (e.count < c || e.count-e.err > c):
			t.Fatalf("value %s seen %d times, held with count %d err %d", v, c, e.count, e.err)
		}
		if b := s.bound(v); b < c {
			t.Fatalf("bound %d of value %s below its count %d", b, v, c)
		}
	}
	// The heaviest values are held (their counts are far above min).
	for _, v := range []string{"0", "1", "2"} {
		if s.byValue[v] == nil {
			t.Errorf("heavy value %s not held", v)
		}
	}
}
