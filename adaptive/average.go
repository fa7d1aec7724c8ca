package adaptive

// average is an exponential moving average over about window samples. Until it has seen
// window samples it is their plain mean, so the first samples are not drowned by a zero
// start. Its zero value with a window set is empty.
type average struct {
	window int
	n      int
	value  float64
}

// add folds x in and returns the new average.
func (a *average) add(x float64) float64 {
	if a.n < a.window {
		a.n++
		a.value += (x - a.value) / float64(a.n)
		return a.value
	}
	a.value += (x - a.value) * 2 / float64(a.window+1)
	return a.value
}
