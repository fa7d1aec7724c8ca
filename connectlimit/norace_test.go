//go:build !race

package connectlimit_test

const raceEnabled = false
