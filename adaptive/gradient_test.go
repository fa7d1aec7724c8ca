package adaptive_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

func newGradient(t *testing.T, s adaptive.Settings) *adaptive.Gradient {
	t.Helper()
	g, err := adaptive.NewGradient(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// feed tells g n samples of rtt, each with the limit's worth of requests in flight (a busy
// instance), and returns the last limit.
func feed(g *adaptive.Gradient, n int, rtt time.Duration) int {
	limit := g.Limit()
	for range n {
		limit = g.Observe(rtt, limit)
	}
	return limit
}

func TestDefaults(t *testing.T) {
	g := newGradient(t, adaptive.Settings{})
	s := g.Settings()
	want := adaptive.Settings{Floor: 1, Ceiling: 1000, Initial: 20, ShortWindow: 10, LongWindow: 600, Tolerance: 1.5, Smoothing: 0.2, Queue: 4}
	if s != want {
		t.Errorf("defaults %+v, want %+v", s, want)
	}
	if g.Limit() != 20 {
		t.Errorf("initial limit %d, want 20", g.Limit())
	}
	// Initial is clamped into [Floor, Ceiling]
	if l := newGradient(t, adaptive.Settings{Floor: 50, Ceiling: 60}).Limit(); l != 50 {
		t.Errorf("initial below the floor: limit %d, want 50", l)
	}
}

func TestSettingsErrorsNameTheField(t *testing.T) {
	for field, s := range map[string]adaptive.Settings{
		"floor":        {Floor: -1},
		"ceiling":      {Floor: 10, Ceiling: 5},
		"initial":      {Initial: -3},
		"short_window": {ShortWindow: -1},
		"long_window":  {ShortWindow: 50, LongWindow: 40},
		"tolerance":    {Tolerance: 0.5},
		"smoothing":    {Smoothing: 1.5},
		"queue":        {Queue: -2},
	} {
		_, err := adaptive.NewGradient(s)
		var se *adaptive.SettingsError
		if !errors.As(err, &se) || se.Field != field || !errors.Is(err, adaptive.ErrInvalidSettings) {
			t.Errorf("%s: error %v", field, err)
		}
		if s.Validate() == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: Validate %v", field, s.Validate())
		}
	}
}

// With a steady latency and the instance busy, the limit grows by the queue allowance
// (smoothed: Smoothing x Queue a sample) up to the ceiling.
func TestGrowsWhileLatencyIsSteady(t *testing.T) {
	g := newGradient(t, adaptive.Settings{Initial: 10, Ceiling: 100})
	// the first sample: 10 x 0.8 + (10 + 4) x 0.2 = 10.8
	if l := g.Observe(20*time.Millisecond, 10); l != 10 {
		t.Fatalf("after one sample: limit %d, want 10 (10.8)", l)
	}
	if l := feed(g, 9, 20*time.Millisecond); l != 18 {
		t.Errorf("after ten samples: limit %d, want 18 (10 + 10 x 0.8)", l)
	}
	if l := feed(g, 1000, 20*time.Millisecond); l != 100 {
		t.Errorf("limit %d, want the ceiling 100", l)
	}
}

// An idle instance (under half its limit in flight) does not move the limit, up or down.
func TestIdleLeavesTheLimit(t *testing.T) {
	g := newGradient(t, adaptive.Settings{Initial: 40})
	for range 100 {
		g.Observe(20*time.Millisecond, 19)
	}
	for range 100 {
		g.Observe(time.Second, 19)
	}
	if l := g.Limit(); l != 40 {
		t.Errorf("limit %d, want 40", l)
	}
}

// A latency spike cuts the limit; once latency is back, the limit grows back.
func TestSpikeCutsAndRecovers(t *testing.T) {
	g := newGradient(t, adaptive.Settings{Initial: 100, Floor: 5, Ceiling: 100})
	before := feed(g, 600, 10*time.Millisecond)
	if before != 100 {
		t.Fatalf("before the spike: limit %d, want 100", before)
	}
	// The first spiked sample moves the short average (weight 2/11) from 10 ms to 26.4 ms
	// and the long one (weight 2/601) to 10.3 ms: gradient 1.5 x 10.3/26.4 = 0.59,
	// estimate 62.6, limit 100 x 0.8 + 62.6 x 0.2 = 92.5.
	if l := g.Observe(100*time.Millisecond, 100); l != 92 {
		t.Errorf("after one spiked sample: limit %d, want 92", l)
	}
	during := feed(g, 100, 100*time.Millisecond)
	if during > 20 {
		t.Errorf("after 100 samples at 10x the latency: limit %d, want <= 20", during)
	}
	after := feed(g, 300, 10*time.Millisecond)
	if after != 100 {
		t.Errorf("300 samples after the spike: limit %d, want 100", after)
	}
}

// A non-positive round trip (a clock stepped back) is ignored.
func TestNonPositiveRTTIgnored(t *testing.T) {
	g := newGradient(t, adaptive.Settings{Initial: 30})
	feed(g, 10, 10*time.Millisecond)
	l := g.Limit()
	g.Observe(0, 100)
	g.Observe(-time.Second, 100)
	if g.Limit() != l {
		t.Errorf("limit moved from %d to %d on non-positive samples", l, g.Limit())
	}
	if l := feed(g, 10, 10*time.Millisecond); l <= 30 {
		t.Errorf("averages poisoned: limit %d after steady samples", l)
	}
}

// Property: for random settings and random latency traces, the limit stays within
// [Floor, Ceiling]; a sustained spike (5x to 50x the base latency) with the instance busy
// lowers it, and after the spike it recovers to where it was within the samples its linear
// growth needs. A spike is seen while the long average lags the short one (LongWindow of 10
// ShortWindows or more here), and it can cut a limit only above twice the queue allowance
// (Limit x 1/2 + Queue, the steepest cut, is below Limit only there).
func TestPropertyBoundsSpikeRecovery(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 24))
		floor := 1 + rng.IntN(20)
		s := adaptive.Settings{
			Floor:       floor,
			Ceiling:     floor + 1 + rng.IntN(500),
			Initial:     1 + rng.IntN(600),
			ShortWindow: 1 + rng.IntN(20),
			Tolerance:   1 + rng.Float64(),
			Smoothing:   0.05 + 0.95*rng.Float64(),
			Queue:       1 + rng.IntN(10),
		}
		s.LongWindow = s.ShortWindow * (10 + rng.IntN(100))
		g := newGradient(t, s)
		check := func(phase string, l int) {
			t.Helper()
			if l < s.Floor || l > s.Ceiling {
				t.Fatalf("seed %d %s: limit %d outside [%d, %d] (%+v)", seed, phase, l, s.Floor, s.Ceiling, s)
			}
		}
		base := time.Duration(1+rng.IntN(50)) * time.Millisecond
		// noise: random in-flight counts and latencies within 20% of the base
		for range 2000 {
			rtt := base + time.Duration(rng.Int64N(int64(base)/5+1))
			check("warm-up", g.Observe(rtt, rng.IntN(2*g.Limit()+1)))
		}
		before := feed(g, 200, base)
		check("steady", before)
		spike := base * time.Duration(5+rng.IntN(46))
		lowest, l := before, before
		for range 2 * s.ShortWindow {
			l = g.Observe(spike, l)
			check("spike", l)
			lowest = min(lowest, l)
		}
		if before > max(s.Floor, 2*s.Queue+1) && lowest >= before {
			t.Fatalf("seed %d: limit never below %d during the spike (%+v)", seed, before, s)
		}
		// from the floor at the latest, as the short average takes a few samples to come down
		need := int(float64(before-s.Floor)/(s.Smoothing*float64(s.Queue))) + 4*s.ShortWindow + 10
		after := l
		for range need {
			after = g.Observe(base, after)
			check("recovery", after)
		}
		if after < before {
			t.Fatalf("seed %d: limit %d after %d samples back at base latency, %d before the spike (%+v)", seed, after, need, before, s)
		}
	}
}
