//go:build unix

package proxy

import (
	"math"
	"syscall"
)

// openFilesLimit returns the process's open-file limit (RLIMIT_NOFILE, its soft limit, which
// Go raises to the hard limit at start), or 0 when it cannot be read.
func openFilesLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return int(min(rl.Cur, math.MaxInt32))
}
