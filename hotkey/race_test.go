//go:build race

package hotkey_test

// raceEnabled: the race detector slows each decision ten times; the long tests do less.
const raceEnabled = true
