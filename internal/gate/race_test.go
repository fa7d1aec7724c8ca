//go:build race

package gate

// race reports whether the race detector is on: it makes sync.Pool drop items at random, so
// allocation counts do not hold.
const race = true
