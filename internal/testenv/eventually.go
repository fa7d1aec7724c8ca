package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond every 5 ms until it holds, and returns how long that took; it fails
// the test, naming what, when cond does not hold within the bound. For state that another
// process or goroutine changes with no clock to advance.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}
