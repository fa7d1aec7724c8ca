package monotime

import (
	"testing"
	"time"
)

var sink int64

// The clock reads a decision may take, side by side (docs/BENCHMARKS.md, "internal/monotime"):
// the runtime's monotonic clock through go:linkname, the same clock through time.Since of a
// time.Time that carries a monotonic reading, and time.Now.

func BenchmarkClockLinkname(b *testing.B) {
	for range b.N {
		sink += baseNano + (nanotime() - baseMono)
	}
}

func BenchmarkClockSince(b *testing.B) {
	for range b.N {
		sink += baseNano + int64(time.Since(Base))
	}
}

func BenchmarkClockNow(b *testing.B) {
	for range b.N {
		sink += time.Now().UnixNano()
	}
}
