package simulate

// Window is the exact reference: a perfect sliding log of (instant, units) entries that
// reports how many units fall in the trailing period (t-Period, t] — the same span the
// sliding_log algorithm counts. Add instants in non-decreasing order. The zero Window with
// Period set is ready to use.
type Window struct {
	// Period is the trailing span, ns.
	Period int64
	at     []int64
	units  []int64
	head   int
	sum    int64
}

// Add records n units at instant t. Units added at the instant of the last entry join it,
// so a log with one timestamp a second holds one entry a second.
func (w *Window) Add(t, n int64) {
	if last := len(w.at) - 1; last >= w.head && w.at[last] == t {
		w.units[last] += n
		w.sum += n
		return
	}
	if w.head > 1024 && w.head*2 > len(w.at) { // compact the consumed prefix
		w.at = append(w.at[:0], w.at[w.head:]...)
		w.units = append(w.units[:0], w.units[w.head:]...)
		w.head = 0
	}
	w.at = append(w.at, t)
	w.units = append(w.units, n)
	w.sum += n
}

// Count returns the units recorded in (t-Period, t]. t must not go backwards between calls.
func (w *Window) Count(t int64) int64 {
	for w.head < len(w.at) && w.at[w.head] <= t-w.Period {
		w.sum -= w.units[w.head]
		w.head++
	}
	return w.sum
}
