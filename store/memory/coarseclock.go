package memory

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/monotime"
)

// coarseResolution is how often the coarse clock (see WithCoarseClock) is refreshed.
const coarseResolution = 500 * time.Microsecond

// The coarse clock is a process-wide time that one background goroutine refreshes from the
// monotonic clock every coarseResolution, so a read is an atomic load (about 1 ns) instead of
// a clock read (about 25 ns on a typical cloud VM, a quarter of a decision). It lags real time
// by up to one step, more when the process is starved of CPU, and never runs backwards. The
// goroutine starts on first use and parks itself after a second without readers; the next
// read restarts it and reads the precise clock once.
const (
	coarseParked  = 0
	coarseRunning = 1
	coarseIdle    = int(time.Second / coarseResolution) // ticks without readers before parking
)

var coarse struct {
	now   atomic.Int64 // Unix ns
	state atomic.Int32
	used  atomic.Bool
}

// coarseNow returns the coarse time as Unix nanoseconds.
func coarseNow() int64 {
	if coarse.state.Load() != coarseRunning {
		return coarseStart()
	}
	if !coarse.used.Load() { // one write per tick at most: no cache-line ping-pong
		coarse.used.Store(true)
	}
	return coarse.now.Load()
}

// coarseMarked reports whether the coarse clock runs and has been read since its last tick:
// then coarseNow is coarse.now.Load().
func coarseMarked() bool { return coarse.state.Load() == coarseRunning && coarse.used.Load() }

func coarseStart() int64 {
	n := monotime.UnixNano()
	if coarse.state.CompareAndSwap(coarseParked, coarseRunning) {
		coarse.used.Store(true)
		coarse.now.Store(max(n, coarse.now.Load()))
		go coarseLoop()
	}
	return n
}

func coarseLoop() {
	t := time.NewTicker(coarseResolution)
	defer t.Stop()
	idle := 0
	for range t.C {
		coarse.now.Store(max(monotime.UnixNano(), coarse.now.Load()))
		if coarse.used.Swap(false) {
			idle = 0
		} else if idle++; idle >= coarseIdle {
			coarse.state.Store(coarseParked)
			return
		}
	}
}
