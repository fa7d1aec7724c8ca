package monotime

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

var sink int64

// The clock reads a decision may take, side by side (docs/BENCHMARKS.md, "internal/monotime"):
// UnixNano (time.Since of a time.Time that carries a monotonic reading) and time.Now. Each
// reports the thread's CPU time per read (cpu-ns/op) beside the wall time, so that a busy
// machine's waits for a CPU do not count. (BenchmarkClockLinkname, runtime.nanotime reached
// through a linkname directive, was measured beside them before the linkname was dropped.)

func BenchmarkClockSince(b *testing.B) {
	benchCPU(b, func() { sink += UnixNano() })
}

func BenchmarkClockNow(b *testing.B) {
	benchCPU(b, func() { sink += time.Now().UnixNano() })
}

// benchCPU runs read b.N times on one locked thread and reports the thread's CPU time per
// read.
func benchCPU(b *testing.B, read func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU(b)
	b.ResetTimer()
	for range b.N {
		read()
	}
	b.StopTimer()
	b.ReportMetric(float64(threadCPU(b)-start)/float64(b.N), "cpu-ns/op")
}

// threadCPU is the calling thread's user and system time, in nanoseconds.
func threadCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestUnixNanoFollowsTheClock: UnixNano agrees with time.Now (the same base, the same
// monotonic clock) and never goes back.
func TestUnixNanoFollowsTheClock(t *testing.T) {
	prev := UnixNano()
	for range 1000 {
		before := time.Now()
		n := UnixNano()
		after := time.Now()
		if n < prev || n < before.Add(-time.Millisecond).UnixNano() || n > after.Add(time.Millisecond).UnixNano() {
			t.Fatalf("UnixNano %d, previous %d, time.Now between %d and %d", n, prev, before.UnixNano(), after.UnixNano())
		}
		prev = n
	}
}
