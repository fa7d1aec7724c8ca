package hotkey

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Tracker keeps the topK values of highest rate over the current and the previous period
// (periods aligned on multiples of period), with the requests the store denied, in bounded
// memory. It is safe for concurrent use.
type Tracker struct {
	period int64
	clock  sluice.Clock

	mu        sync.Mutex
	epoch     int64
	cur, prev *sketch
}

// NewTracker returns a Tracker of topK values (DefaultTopK when <= 0) over periods of period
// (at least a millisecond), on clock (nil: sluice.SystemClock).
func NewTracker(topK int, period time.Duration, clock sluice.Clock) *Tracker {
	return newTracker(topK, period, clock, false)
}

func newTracker(topK int, period time.Duration, clock sluice.Clock, bounds bool) *Tracker {
	if topK <= 0 {
		topK = DefaultTopK
	}
	if clock == nil {
		clock = sluice.SystemClock{}
	}
	t := &Tracker{period: int64(max(period, time.Millisecond)), clock: clock}
	t.cur, t.prev = newSketch(topK, bounds), newSketch(topK, bounds)
	return t
}

// Add counts n units of value, denied or not.
func (t *Tracker) Add(value string, n int64, denied bool) {
	t.mu.Lock()
	t.rotate()
	e := t.cur.add(value, n)
	if denied {
		e.denied += n
	}
	t.mu.Unlock()
}

// Denied records that the store denied a request of value, already counted.
func (t *Tracker) Denied(value string) {
	t.mu.Lock()
	if e := t.cur.byValue[value]; e != nil {
		e.denied++
	}
	t.mu.Unlock()
}

// rotate moves to the clock's period; held under t.mu.
func (t *Tracker) rotate() {
	epoch := t.clock.Now().UnixNano() / t.period
	switch {
	case epoch == t.epoch:
		return
	case epoch == t.epoch+1:
		t.prev.reset()
		t.cur, t.prev = t.prev, t.cur
	case epoch > t.epoch+1:
		t.cur.reset()
		t.prev.reset()
	default:
		return // the clock went back: keep the period (it can only over-count)
	}
	t.epoch = epoch
}

// Value is one tracked value in Top.
type Value struct {
	// Value is the tracked value (for a server, the descriptor's store key).
	Value string `json:"value"`
	// Rate is the value's requests per second over the last period, an upper bound (the
	// sliding estimate of the current and the previous period), and Error how much of it may
	// be other values' (Space-Saving's error).
	Rate  float64 `json:"rate"`
	Error float64 `json:"error"`
	// DeniedRate is the part of Rate the store denied.
	DeniedRate float64 `json:"denied_rate"`
}

// Top returns the n values of highest rate (every tracked value when n <= 0), highest
// first, and the total rate of all values.
func (t *Tracker) Top(n int) ([]Value, float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rotate()
	now := t.clock.Now().UnixNano()
	secs := float64(t.period) / 1e9
	weight := max(0, 1-float64(now-t.epoch*t.period)/float64(t.period)) // of the previous period
	out := make([]Value, 0, len(t.cur.heap)+len(t.prev.heap))
	seen := make(map[string]int, len(t.cur.heap))
	for _, e := range t.cur.heap {
		seen[e.value] = len(out)
		out = append(out, Value{Value: e.value, Rate: float64(e.count) / secs, Error: float64(e.err) / secs,
			DeniedRate: float64(e.denied) / secs})
	}
	for _, e := range t.prev.heap {
		v := Value{Value: e.value, Rate: float64(e.count) * weight / secs, Error: float64(e.err) * weight / secs,
			DeniedRate: float64(e.denied) * weight / secs}
		if i, ok := seen[e.value]; ok {
			out[i].Rate += v.Rate
			out[i].Error += v.Error
			out[i].DeniedRate += v.DeniedRate
			continue
		}
		out = append(out, v)
	}
	sortValues(out)
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out, (float64(t.cur.total) + float64(t.prev.total)*weight) / secs
}
