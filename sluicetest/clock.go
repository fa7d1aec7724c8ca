// Package sluicetest holds test doubles for code that uses Sluice, as net/http/httptest does
// for net/http: a ManualClock to pass wherever a sluice.Clock is taken (stores, decorators,
// Limiter) so tests move time instead of sleeping, and stores that stand in for a real one:
// Recorder and CountingStore watch what reaches it, FlakyStore, TimingOutStore and GateStore
// fail, time out or hold decisions on demand. Every double is safe for concurrent use.
package sluicetest

import (
	"sync"
	"time"
)

// ManualClock is a sluice.Clock that moves only when told to. It is safe for concurrent use.
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
