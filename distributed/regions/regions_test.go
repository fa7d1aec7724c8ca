package regions

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// cutCoordinator is a Coordinator a region can be cut off from.
type cutCoordinator struct {
	Coordinator
	cut *atomic.Bool
}

var errCut = errors.New("cut off")

func (c cutCoordinator) Exchange(ctx context.Context, x *Exchange) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Coordinator.Exchange(ctx, x)
}

func (c cutCoordinator) Propose(ctx context.Context, ps []Proposal) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Coordinator.Propose(ctx, ps)
}

// fleet is three regions of one process on a manual clock, each its own memory store.
type fleet struct {
	clock  *sluicetest.ManualClock
	names  []string
	stores []*Store
	cut    []*atomic.Bool
}

func newFleet(t *testing.T, mode Mode, epoch time.Duration) *fleet {
	t.Helper()
	f := &fleet{clock: sluicetest.NewManualClock(time.Unix(1e9, 0)), names: []string{"eu", "us", "ap"}}
	coord := NewMemoryCoordinator()
	var regions []Region
	for range f.names {
		m, err := memory.New(memory.WithClock(f.clock), memory.WithCoarseClock(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		regions = append(regions, Region{Store: m})
	}
	for i, n := range f.names {
		regions[i].Name = n
	}
	for _, n := range f.names {
		cut := new(atomic.Bool)
		s, err := New(Config{Region: n, Regions: regions, Mode: mode, Coordinator: cutCoordinator{coord, cut},
			Clock: f.clock, Manual: true, Epoch: epoch, Interval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		f.stores, f.cut = append(f.stores, s), append(f.cut, cut)
	}
	return f
}

// TestEscrowNeverOverAcrossAPartition (issue 37): three regions share 100 a second (fixed
// windows); the demand is skewed and moves from region to region, and one region is cut
// off from the coordinator for 3 s. The fleet never admits more than the limit in a
// window, before, during and after the cut; the region cut off decides on the epochs it
// read and then on nothing: it admits nothing from two epochs (and the skew) after the cut;
// after the cut heals, it is served again.
func TestEscrowNeverOverAcrossAPartition(t *testing.T) {
	const epoch = 250 * time.Millisecond
	rule := sluice.FixedWindow(100, time.Second)
	f := newFleet(t, Escrow, epoch)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 37))
	perWindow := map[int64]int64{}
	deniedIn := map[int64]int64{}
	byRegion := map[int64][]int64{}
	demand := []float64{200, 20, 20} // per second
	var admittedCut, admitted int64
	start := f.clock.Now()
	cutFrom, cutTo := 4*time.Second, 7*time.Second
	const step = 5 * time.Millisecond
	for at := time.Duration(0); at < 12*time.Second; at += step {
		switch at {
		case 2 * time.Second:
			demand = []float64{20, 200, 20}
		case cutFrom:
			f.cut[2].Store(true)
			demand = []float64{20, 100, 150}
		case cutTo:
			f.cut[2].Store(false)
		case 9 * time.Second:
			demand = []float64{150, 20, 20}
		}
		if at%(100*time.Millisecond) == 0 {
			for _, s := range f.stores {
				_ = s.Sync(ctx)
			}
		}
		now := f.clock.Now()
		w := now.UnixNano() / int64(time.Second)
		for i, s := range f.stores {
			if r.Float64() >= demand[i]*step.Seconds() {
				continue
			}
			d, err := s.Take(ctx, sluice.Request{Key: "tenant", Rule: rule, N: 1})
			if err != nil {
				t.Fatal(err)
			}
			if byRegion[w] == nil {
				byRegion[w] = make([]int64, len(f.stores))
			}
			if d.Allowed {
				perWindow[w]++
				byRegion[w][i]++
				admitted++
				if i == 2 && at >= cutFrom+2*epoch+DefaultMaxClockSkew && at < cutTo {
					admittedCut++
				}
			} else {
				deniedIn[w]++
			}
		}
		f.clock.Advance(step)
	}
	var needless int64 // denials while the window still had room at its end
	for w := start.Unix(); w <= f.clock.Now().Unix(); w++ {
		n := perWindow[w]
		if n > rule.Limit {
			t.Errorf("window %v: %d admitted, limit %d", time.Unix(w, 0).Sub(start), n, rule.Limit)
		}
		needless += min(deniedIn[w], max(rule.Limit-n, 0))
		t.Logf("window %2d: admitted %3d (by region %v), denied %d", w-start.Unix(), n, byRegion[w], deniedIn[w])
	}
	if admittedCut > 0 {
		t.Errorf("the region cut off admitted %d after its epochs ran out", admittedCut)
	}
	if admitted < 800 {
		t.Errorf("only %d admitted in 12 windows of 100", admitted)
	}
	t.Logf("escrow: %d admitted in 12 s (limit 100/s), %d denied needlessly (the window had room at its end)", admitted, needless)
}

// TestAsyncWithinItsBound (issue 37): three regions count a fixed-window limit in Async
// mode, each reading the others' counts every interval; with every region flooding at rate
// r, the fleet admits at most the limit plus what the other regions admit while a region's
// view of them is stale: limit + (regions - 1) x r x 2 intervals per window.
func TestAsyncWithinItsBound(t *testing.T) {
	rule := sluice.FixedWindow(100, time.Second)
	f := newFleet(t, Async, 0)
	ctx := context.Background()
	const interval = 100 * time.Millisecond
	const step = time.Millisecond
	const rate = 400.0 // per region, per second
	perWindow := map[int64]int64{}
	r := rand.New(rand.NewPCG(2, 37))
	for at := time.Duration(0); at < 5*time.Second; at += step {
		if at%interval == 0 {
			for _, s := range f.stores {
				if err := s.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		w := f.clock.Now().UnixNano() / int64(time.Second)
		for _, s := range f.stores {
			if r.Float64() >= rate*step.Seconds() {
				continue
			}
			d, err := s.Take(ctx, sluice.Request{Key: "k", Rule: rule, N: 1})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				perWindow[w]++
			}
		}
		f.clock.Advance(step)
	}
	bound := rule.Limit + int64(2*rate*2*interval.Seconds())
	var most int64
	for _, n := range perWindow {
		most = max(most, n)
	}
	if most > bound {
		t.Errorf("async: %d admitted in a window, bound %d", most, bound)
	}
	t.Logf("async: at most %d admitted in a window of limit %d (bound %d)", most, rule.Limit, bound)
	if _, err := f.stores[0].Take(ctx, sluice.Request{Key: "k", Rule: sluice.TokenBucket(10, time.Second, 0), N: 1}); !errors.Is(err, sluice.ErrInvalidRule) {
		t.Errorf("a token bucket in async mode: %v, want ErrInvalidRule", err)
	}
}

func TestConfigErrors(t *testing.T) {
	m, _ := memory.New()
	defer m.Close()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Region: "a"}, "regions: none listed"},
		{Config{Region: "x", Regions: []Region{{"a", m}}, Coordinator: NewMemoryCoordinator()}, `region: "x" is not one of`},
		{Config{Region: "a", Regions: []Region{{"a", m}, {"a", m}}, Coordinator: NewMemoryCoordinator()}, `regions[1].name: "a" listed twice`},
		{Config{Region: "a", Regions: []Region{{"a b", m}}, Coordinator: NewMemoryCoordinator()}, `regions[0].name: want a name`},
		{Config{Region: "a", Regions: []Region{{"a", nil}}, Coordinator: NewMemoryCoordinator()}, `regions[0].store: "a" has no store`},
		{Config{Region: "a", Regions: []Region{{"a", m}}}, "coordinator: escrow needs a coordinator"},
		{Config{Region: "a", Regions: []Region{{"a", m}}, Coordinator: NewMemoryCoordinator(), Epoch: time.Second, MaxClockSkew: time.Second}, "max_clock_skew"},
		{Config{Region: "a", Regions: []Region{{"a", m}}, Coordinator: NewMemoryCoordinator(), Interval: -1}, "interval: want 1ms to 1m0s, got -1ns"},
	} {
		_, err := New(tc.cfg)
		var fe *sluice.FieldError
		if err == nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a field error with %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := ParseMode("both"); err == nil {
		t.Error("ParseMode(both) succeeded")
	}
	for _, m := range []Mode{Escrow, Async} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%v) = %v, %v", m, got, err)
		}
	}
}
