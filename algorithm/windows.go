package algorithm

// WindowIndex returns the index of the window of length length (ns, > 0) that t (Unix ns)
// falls in: floor(t / length). Windows are aligned to the Unix epoch, so every process and
// every store names a window the same way.
func WindowIndex(t, length int64) int64 {
	q := t / length
	if t%length != 0 && t < 0 {
		q--
	}
	return q
}
