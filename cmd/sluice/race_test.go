//go:build race

package main

// raceEnabled: the race detector slows sluice serve several times over, so the real-time
// fleet test runs a sluice binary built without it (fleetBinary).
const raceEnabled = true
