//go:build !unix

package proxy

// openFilesLimit returns 0: the open-file limit is not known on this system.
func openFilesLimit() int { return 0 }
