// Package monotime reads the monotonic clock as Unix nanoseconds without building a
// time.Time: the clock read of the memory store's decisions and of the decorators' hot paths.
//
// It reads time.Since of a fixed base, which takes only the runtime's monotonic clock. It
// once reached runtime.nanotime through go:linkname, which Go is closing; measured on the
// shared 2-core machine, thread CPU time per read (BenchmarkClock*, docs/BENCHMARKS.md),
// time.Since costs 29.8 ns against the linkname's 27.6 ns (time.Now: 50 ns), 1.3 ns more (2%)
// on a memory-store decision that reads the precise clock (68 ns) and nothing on one that
// reads the coarse clock, the default for most rules.
package monotime

import "time"

// Base is the instant the clock is anchored to: UnixNano is Base plus the monotonic time
// elapsed since, so it never jumps when the wall clock is stepped. sluice.SystemClock.Now
// derives its time from the same base, so the two agree.
var Base = time.Now()

var baseNano = Base.UnixNano()

// UnixNano returns the current time as Unix nanoseconds: one read of the monotonic clock,
// about half the cost of time.Now. It is safe for concurrent use.
func UnixNano() int64 { return baseNano + int64(time.Since(Base)) }
