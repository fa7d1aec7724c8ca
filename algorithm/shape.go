package algorithm

import "github.com/sluicehq/sluice"

// Shape is how a window algorithm's rule counts: in windows of Length ns aligned to the Unix
// epoch (WindowIndex names them), of which a decision reads the Count newest, the current one
// last. Every place that keeps window counters (SlidingWindow here, package distributed's
// Async views, the memcached store's counters) takes its shape from WindowShape, so they all
// count in the same windows.
type Shape struct {
	// Length is the length of one window, ns.
	Length int64
	// Count is how many windows a decision reads: 1 for a fixed window, N+1 for a sliding
	// window of N sub-windows (the N inside the period and the one sliding out).
	Count int64
}

// WindowShape returns the shape of rule r's windows: a sliding window counts in sub-windows
// of Period/N (N = r.Windows()) and reads N+1 of them; any other algorithm, as a fixed window,
// in one window of Period. The rule must be valid (sluice.Rule.Validate).
func WindowShape(r sluice.Rule) Shape {
	if r.Algorithm == sluice.AlgorithmSlidingWindow {
		n := r.Windows()
		return Shape{Length: int64(r.Period) / n, Count: n + 1}
	}
	return Shape{Length: int64(r.Period), Count: 1}
}

// RingIndex returns the position of window j's counter in a ring of n > 0 counters, where
// window j sits at j mod n: a position in [0, n), for negative window indexes too.
func RingIndex(j, n int64) int {
	i := j % n
	if i < 0 {
		i += n
	}
	return int(i)
}
