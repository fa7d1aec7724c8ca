// Package monotime reads the runtime's monotonic clock as Unix nanoseconds without building a
// time.Time: the clock read of the memory store's decisions and of the decorators' hot paths.
// It keeps the go:linkname that this needs out of the public packages.
package monotime

import (
	"time"
	_ "unsafe" // for go:linkname
)

// Base is the instant the clock is anchored to: UnixNano is Base plus the monotonic time
// elapsed since, so it never jumps when the wall clock is stepped. sluice.SystemClock.Now
// derives its time from the same base, so the two agree.
var Base = time.Now()

var (
	baseNano = Base.UnixNano()
	baseMono = monoAt(Base)
)

// monoAt returns the runtime clock's reading at t. It reads the clock and time.Since(t) one
// after the other, so it errs low by the time between the two reads; that time can be tens
// of microseconds on the first calls (code faulted in at start-up), which would make
// UnixNano lead SystemClock.Now. The best of a few tries is exact to a few nanoseconds.
func monoAt(t time.Time) int64 {
	m := nanotime() - int64(time.Since(t))
	for range 3 {
		m = max(m, nanotime()-int64(time.Since(t)))
	}
	return m
}

// UnixNano returns the current time as Unix nanoseconds: one read of the monotonic clock,
// about half the cost of time.Now. It is safe for concurrent use.
func UnixNano() int64 { return baseNano + (nanotime() - baseMono) }

// nanotime is the runtime's monotonic clock, the one time.Since reads, without time.Time's
// bookkeeping.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
