package sluice

import (
	"sync"
	"time"
	_ "unsafe" // for go:linkname
)

// Clock tells the time. Stores, decorators and Limiter.Wait take a Clock option so tests can
// pass a ManualClock instead of sleeping. Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed on this clock.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock. Its zero value is ready to use. Now reads the monotonic
// clock (time.Since on a fixed base), which is about twice as cheap as time.Now and never
// jumps when the wall clock is stepped.
type SystemClock struct{}

var clockBase = time.Now()

// Now returns the current time, derived from the monotonic clock.
func (SystemClock) Now() time.Time { return clockBase.Add(time.Since(clockBase)) }

// UnixNano returns Now as Unix nanoseconds without building a time.Time: one read of the
// monotonic clock. Hot paths use it.
func (SystemClock) UnixNano() int64 { return clockBaseNano + (nanotime() - clockBaseMono) }

var (
	clockBaseNano = clockBase.UnixNano()
	clockBaseMono = monoAt(clockBase)
)

// monoAt returns the runtime clock's reading at t. It reads the clock and time.Since(t) one
// after the other, so it errs low by the time between the two reads; that time can be tens
// of microseconds on the first calls (code faulted in at start-up), which would make
// UnixNano lead Now. The best of a few tries is exact to a few nanoseconds.
func monoAt(t time.Time) int64 {
	m := nanotime() - int64(time.Since(t))
	for range 3 {
		m = max(m, nanotime()-int64(time.Since(t)))
	}
	return m
}

// nanotime is the runtime's monotonic clock, the one time.Since reads, without time.Time's
// bookkeeping.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// After is time.After.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// ManualClock is a Clock that moves only when told to. It is safe for concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []manualWaiter
}

type manualWaiter struct {
	at time.Time
	ch chan time.Time
}

// NewManualClock returns a ManualClock that reads t until moved.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives when the clock has been advanced by at least d.
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	at := c.now.Add(d)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, manualWaiter{at: at, ch: ch})
	return ch
}

// Waiters reports how many After channels are pending; tests use it to know a goroutine is
// blocked before advancing the clock.
func (c *ManualClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// Advance moves the clock forward by d (backward if d is negative) and fires due waiters.
func (c *ManualClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t and fires due waiters.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.ch <- t
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
}
