//go:build race

package replay

// raceEnabled: the race detector slows every decision about tenfold; the long tests shorten.
const raceEnabled = true
