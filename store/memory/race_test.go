//go:build race

package memory_test

// raceEnabled: the race detector slows eviction (a lock and a peek per sampled key) about
// forty times; the eviction properties draw fewer seeds and smaller floods under it.
const raceEnabled = true
