package memory

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/fastpath"
	"github.com/sluicehq/sluice/internal/monotime"
)

// TestCoarseClockTracksRealTime reads the coarse clock until it has moved at least 5 ms (at
// most 5 s of real time) and checks it never runs backwards and never leads the precise clock.
// How far it may lag depends on the scheduler (a loaded CI machine can starve the refreshing
// goroutine for a while), so the lag bound is generous: this checks the clock moves, not its
// resolution.
func TestCoarseClockTracksRealTime(t *testing.T) {
	first := coarseNow()
	prev := first
	deadline := time.Now().Add(5 * time.Second)
	for prev-first < int64(5*time.Millisecond) && time.Now().Before(deadline) {
		got := coarseNow()
		if got < prev {
			t.Fatalf("coarse clock ran backwards by %v", time.Duration(prev-got))
		}
		if lead := got - monotime.UnixNano(); lead > 0 {
			t.Fatalf("coarse clock leads the system clock by %v", time.Duration(lead))
		}
		prev = got
	}
	if prev-first < int64(5*time.Millisecond) {
		t.Fatalf("coarse clock moved %v in 5 s", time.Duration(prev-first))
	}
	if lag := time.Duration(monotime.UnixNano() - coarseNow()); lag > time.Second {
		t.Errorf("coarse clock lags by %v", lag)
	}
}

// TestCoarseClockOption checks which clock a decision reads: by default the coarse one for a
// rule that tolerates its tick, the precise one for a rule that does not, and always the
// precise one with WithCoarseClock(false). The coarse clock never leads the precise one, and
// lags it by up to a tick; a precise read made after another is never behind it.
func TestCoarseClockOption(t *testing.T) {
	tolerant := algorithm.Compile(sluice.TokenBucket(100, time.Second, 0))
	fine := algorithm.Compile(sluice.TokenBucket(10_000, time.Second, 1))
	if !tolerant.ToleratesTick(int64(coarseResolution)) || fine.ToleratesTick(int64(coarseResolution)) {
		t.Fatal("test rules: wrong tolerance")
	}
	on, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer on.Close()
	off, err := New(WithCoarseClock(false))
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if !on.coarse || off.coarse {
		t.Fatalf("coarse: default %v, WithCoarseClock(false) %v", on.coarse, off.coarse)
	}
	for i := 0; i < 1000; i++ {
		before := monotime.UnixNano()
		for _, c := range []struct {
			s *Store
			p *algorithm.Params
		}{{on, &fine}, {off, &fine}, {off, &tolerant}} {
			if got := c.s.nowFor(c.p); got < before {
				t.Fatalf("coarse %v, rule %s: read %v behind the precise clock", c.s.coarse, c.p.Rule, time.Duration(before-got))
			}
		}
	}
}

// TestEntryClockFollowsRule checks the clock choice an entry keeps for its rule (entry.coarse,
// which TakeLocal reads): set when the key is created, changed with its rule, and never set
// with a clock of the caller's or WithCoarseClock(false).
func TestEntryClockFollowsRule(t *testing.T) {
	tolerant := sluice.TokenBucket(1_000_000, time.Second, 0) // 500 per tick of 10^6
	strict := sluice.TokenBucket(10_000, time.Second, 1)      // 5 per tick, burst of 1
	for _, c := range []struct {
		name string
		opts []Option
		on   bool // whether the tolerant rule reads the coarse clock
	}{{"default", nil, true}, {"WithCoarseClock(false)", []Option{WithCoarseClock(false)}, false}, {"WithClock", []Option{WithClock(sluice.SystemClock{})}, false}} {
		s, err := New(c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		for i, step := range []struct {
			rule   sluice.Rule
			coarse bool
		}{{tolerant, c.on}, {strict, false}, {tolerant, c.on}, {strict, false}} {
			if _, _, _, _, err := s.TakeLocal(fastpath.Token{}, "k", step.rule, 1); err != nil {
				t.Fatal(err)
			}
			_, _, e := s.locked("k", &step.rule)
			if e == nil {
				t.Fatalf("%s step %d: no entry under %s", c.name, i, step.rule)
			}
			got := e.coarse
			e.mu.Unlock()
			if got != step.coarse {
				t.Errorf("%s step %d, %s: entry reads the coarse clock %v, want %v", c.name, i, step.rule, got, step.coarse)
			}
		}
		s.Close()
	}
}
