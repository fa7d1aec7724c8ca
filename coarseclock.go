package sluice

import (
	"sync/atomic"
	"time"
)

// CoarseResolution is how often CoarseClock's time is refreshed.
const CoarseResolution = 500 * time.Microsecond

// CoarseClock is a Clock that trades resolution for speed. It reads a process-wide time that
// one background goroutine refreshes from the monotonic clock every CoarseResolution, so a
// read is an atomic load (about 1 ns) instead of a clock read (about 25 ns on a typical
// cloud VM, a quarter of a memory-store decision). Its zero value is ready to use.
//
// Time read from it lags real time by up to one CoarseResolution step, more when the process
// is starved of CPU; it never runs backwards. Decisions on rules whose emission interval
// (Period / Limit) is near the resolution become burstier by up to one step's worth of units,
// so keep SystemClock for rates above a few hundred per second per key that must be shaped
// finely. The goroutine starts on first use and parks itself after a second without
// readers; the next read restarts it and reads the precise clock once.
type CoarseClock struct{}

const (
	coarseParked  = 0
	coarseRunning = 1
	coarseIdle    = int(time.Second / CoarseResolution) // ticks without readers before parking
)

var coarse struct {
	now   atomic.Int64 // Unix ns
	state atomic.Int32
	used  atomic.Bool
}

// UnixNano returns the coarse time as Unix nanoseconds.
func (CoarseClock) UnixNano() int64 {
	if coarse.state.Load() != coarseRunning {
		return coarseStart()
	}
	if !coarse.used.Load() { // one write per tick at most: no cache-line ping-pong
		coarse.used.Store(true)
	}
	return coarse.now.Load()
}

// Now returns the coarse time.
func (c CoarseClock) Now() time.Time { return time.Unix(0, c.UnixNano()) }

// After is time.After.
func (CoarseClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func coarseStart() int64 {
	n := SystemClock{}.UnixNano()
	if coarse.state.CompareAndSwap(coarseParked, coarseRunning) {
		coarse.used.Store(true)
		coarse.now.Store(max(n, coarse.now.Load()))
		go coarseLoop()
	}
	return n
}

func coarseLoop() {
	t := time.NewTicker(CoarseResolution)
	defer t.Stop()
	idle := 0
	for range t.C {
		coarse.now.Store(max(SystemClock{}.UnixNano(), coarse.now.Load()))
		if coarse.used.Swap(false) {
			idle = 0
		} else if idle++; idle >= coarseIdle {
			coarse.state.Store(coarseParked)
			return
		}
	}
}
