package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed/regions"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// The regions scenario: one global limit shared by three regions far apart, each deciding
// on its own store, under skewed demand that moves from region to region, and one region cut
// off for a while.
const (
	RegionsScenario   = "regions"
	RegionsSummary    = "three regions 50-150 ms apart share one global limit under shifting demand and a partition: per-region limits, write-everywhere, async, escrow"
	RegionsDefinition = "1 key, fixed window of 1000 per 10s; regions eu, us, ap with one-way delays eu-us 50 ms, eu-ap 100 ms, us-ap 150 ms (the escrow coordinator in eu); Poisson arrivals (seeded) per region per second: 0-60 s eu 120 us 30 ap 10, 60-120 s eu 20 us 150 ap 20, 120-180 s eu 60 us 60 ap 80, 180-240 s eu 40 us 40 ap 120, 240-300 s 60 each; ap cut off from the others from 130 s to 170 s; modes: per_region (each region enforces the whole limit alone), write_everywhere (each region counts its admissions at once and the others' when they arrive, lost while cut off), async (regions.Async, interval 100 ms, each read of another region as old as the delay to it), escrow (regions.Escrow, interval 100 ms, epoch 1 s, a sync as late as half the delay to the coordinator); over-admission: units admitted past the limit in a window, over the limit of every window; needless denials: requests denied in a window that ended with room, over the demand; 300 s"
)

// Regions scenario constants (RegionsDefinition).
const (
	regionsLimit    = 1000
	regionsPeriod   = 10 * time.Second
	regionsDuration = 300 * time.Second
	regionsInterval = 100 * time.Millisecond
	regionsEpoch    = time.Second
	regionsStep     = time.Millisecond
)

var (
	regionNames = []string{"eu", "us", "ap"}
	// regionDelay is the one-way delay between two regions.
	regionDelay = [3][3]time.Duration{{0, 50 * time.Millisecond, 100 * time.Millisecond}, {50 * time.Millisecond, 0, 150 * time.Millisecond}, {100 * time.Millisecond, 150 * time.Millisecond, 0}}
	// regionDemand is each region's demand (requests per second) from each phase's start.
	regionDemand = []struct {
		from time.Duration
		rate [3]float64
	}{
		{0, [3]float64{120, 30, 10}}, {60 * time.Second, [3]float64{20, 150, 20}}, {120 * time.Second, [3]float64{60, 60, 80}},
		{180 * time.Second, [3]float64{40, 40, 120}}, {240 * time.Second, [3]float64{60, 60, 60}},
	}
	regionCut = [2]time.Duration{130 * time.Second, 170 * time.Second} // ap cut off
)

// RegionModes are the modes the regions scenario compares, in its rows' order.
var RegionModes = []string{"per_region", "write_everywhere", "async", "escrow"}

// RegionsRow is one mode's outcome over the whole run.
type RegionsRow struct {
	Mode     string
	Demand   int64 // requests offered
	Admitted int64
	// OverAdmission is the units admitted past the limit in any window, over the limit of
	// every window; MaxOver the most in one window past the limit, MaxOverClear the most in
	// a window clear of the cut (not overlapping it, nor the window after).
	OverAdmission         float64
	MaxOver, MaxOverClear int64
	// Needless is the requests denied in windows that ended with room, over the demand.
	Needless float64
	// CutAdmitted is what the region cut off admitted once two epochs of its cut had passed
	// (escrow: nothing).
	CutAdmitted int64
}

// RegionsResult is the regions scenario's outcome: a row per mode and, for the figure, the
// admitted units per window per mode and escrow's shares per region over time.
type RegionsResult struct {
	Rows []RegionsRow
	// Windows are the windows' starts; Admitted[mode][i] the units admitted in window i.
	Windows  []time.Duration
	Admitted map[string][]int64
	// ShareTimes and Shares[region][i] are escrow's shares (units per period) at each time.
	ShareTimes []time.Duration
	Shares     [][]int64
	Limit      int64
	Cut        [2]time.Duration
}

// regionDecider decides region r's request at the run's clock.
type regionDecider interface {
	decide(ctx context.Context, r int) (bool, error)
	// tick runs the mode's background work due at t (syncs, deliveries).
	tick(ctx context.Context, t time.Duration) error
	close()
}

// RunRegions replays the regions scenario (RegionsDefinition) with seed.
func RunRegions(ctx context.Context, seed uint64) (*RegionsResult, error) {
	rule := sluice.FixedWindow(regionsLimit, regionsPeriod)
	res := &RegionsResult{Admitted: map[string][]int64{}, Limit: regionsLimit, Cut: regionCut}
	for w := time.Duration(0); w < regionsDuration; w += regionsPeriod {
		res.Windows = append(res.Windows, w)
	}
	for _, mode := range RegionModes {
		clock := sluicetest.NewManualClock(time.Unix(1_700_000_000, 0).Truncate(regionsPeriod))
		d, err := newRegionDecider(mode, clock, rule, res)
		if err != nil {
			return nil, err
		}
		row, admitted, err := runRegionMode(ctx, mode, d, clock, seed)
		d.close()
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, row)
		res.Admitted[mode] = admitted
	}
	return res, nil
}

// cut reports whether the link between regions a and b is down at t.
func cut(a, b int, t time.Duration) bool {
	return a != b && (a == 2 || b == 2) && t >= regionCut[0] && t < regionCut[1]
}

func runRegionMode(ctx context.Context, mode string, d regionDecider, clock *sluicetest.ManualClock, seed uint64) (RegionsRow, []int64, error) {
	r := rand.New(rand.NewPCG(seed, 37))
	row := RegionsRow{Mode: mode}
	windows := int(regionsDuration / regionsPeriod)
	admitted := make([]int64, windows)
	denied := make([]int64, windows)
	phase := 0
	for t := time.Duration(0); t < regionsDuration; t += regionsStep {
		if err := ctx.Err(); err != nil {
			return row, nil, err
		}
		if phase+1 < len(regionDemand) && t >= regionDemand[phase+1].from {
			phase++
		}
		if err := d.tick(ctx, t); err != nil {
			return row, nil, err
		}
		w := int(t / regionsPeriod)
		for reg := range regionNames {
			if r.Float64() >= regionDemand[phase].rate[reg]*regionsStep.Seconds() {
				continue
			}
			row.Demand++
			ok, err := d.decide(ctx, reg)
			if err != nil {
				return row, nil, err
			}
			if ok {
				admitted[w]++
				row.Admitted++
				if reg == 2 && t >= regionCut[0]+2*regionsEpoch+regions.DefaultMaxClockSkew && t < regionCut[1] {
					row.CutAdmitted++
				}
			} else {
				denied[w]++
			}
		}
		clock.Advance(regionsStep)
	}
	var over, needless int64
	for w := range admitted {
		if x := admitted[w] - regionsLimit; x > 0 {
			over += x
			row.MaxOver = max(row.MaxOver, x)
			if start := time.Duration(w) * regionsPeriod; start+regionsPeriod <= regionCut[0] || start >= regionCut[1]+regionsPeriod {
				row.MaxOverClear = max(row.MaxOverClear, x)
			}
		}
		needless += min(denied[w], max(regionsLimit-admitted[w], 0))
	}
	row.OverAdmission = float64(over) / float64(regionsLimit*int64(windows))
	row.Needless = float64(needless) / float64(max(row.Demand, 1))
	return row, admitted, nil
}

func newRegionDecider(mode string, clock *sluicetest.ManualClock, rule sluice.Rule, res *RegionsResult) (regionDecider, error) {
	stores := make([]*memory.Store, len(regionNames))
	for i := range stores {
		s, err := memory.New(memory.WithClock(clock), memory.WithCoarseClock(false), memory.WithSweepInterval(-1))
		if err != nil {
			return nil, err
		}
		stores[i] = s
	}
	switch mode {
	case "per_region":
		return &perRegion{stores: stores, rule: rule}, nil
	case "write_everywhere":
		return newWriteEverywhere(clock, rule, stores), nil
	case "async":
		return newRegionsAsync(clock, rule, stores)
	case "escrow":
		return newRegionsEscrow(clock, rule, stores, res)
	}
	return nil, fmt.Errorf("simulate: regions: unknown mode %q", mode)
}

// perRegion: each region enforces the whole limit on its own store.
type perRegion struct {
	stores []*memory.Store
	rule   sluice.Rule
}

func (p *perRegion) decide(ctx context.Context, r int) (bool, error) {
	d, err := p.stores[r].Take(ctx, sluice.Request{Key: "k", Rule: p.rule, N: 1})
	return d.Allowed, err
}
func (p *perRegion) tick(context.Context, time.Duration) error { return nil }
func (p *perRegion) close() {
	for _, s := range p.stores {
		_ = s.Close()
	}
}

// writeEverywhere: each region counts its own admissions at once and the others' when they
// arrive (their delay later); one sent over a cut link is lost.
type writeEverywhere struct {
	clock   *sluicetest.ManualClock
	rule    sluice.Rule
	counts  [3]map[int64]int64 // per region: window -> count as it knows it
	flight  []weMsg
	stores  []*memory.Store
	elapsed func() time.Duration
}

type weMsg struct {
	at     time.Duration
	to     int
	window int64
}

func newWriteEverywhere(clock *sluicetest.ManualClock, rule sluice.Rule, stores []*memory.Store) *writeEverywhere {
	w := &writeEverywhere{clock: clock, rule: rule, stores: stores}
	start := clock.Now()
	w.elapsed = func() time.Duration { return clock.Now().Sub(start) }
	for i := range w.counts {
		w.counts[i] = map[int64]int64{}
	}
	return w
}

func (w *writeEverywhere) decide(_ context.Context, r int) (bool, error) {
	win := w.clock.Now().UnixNano() / int64(w.rule.Period)
	if w.counts[r][win] >= w.rule.Limit {
		return false, nil
	}
	w.counts[r][win]++
	t := w.elapsed()
	for o := range w.counts {
		if o != r && !cut(r, o, t) {
			w.flight = append(w.flight, weMsg{t + regionDelay[r][o], o, win})
		}
	}
	return true, nil
}

func (w *writeEverywhere) tick(_ context.Context, t time.Duration) error {
	kept := w.flight[:0]
	for _, m := range w.flight {
		if m.at <= t {
			w.counts[m.to][m.window]++
		} else {
			kept = append(kept, m)
		}
	}
	w.flight = kept
	return nil
}

func (w *writeEverywhere) close() {
	for _, s := range w.stores {
		_ = s.Close()
	}
}

// regionsStores decides with one regions.Store per region.
type regionsStores struct {
	stores  []*regions.Store
	mem     []*memory.Store
	rule    sluice.Rule
	nextAt  []time.Duration // each region's next sync
	every   []time.Duration
	onSync  func(t time.Duration)
	elapsed func() time.Duration
}

func (s *regionsStores) decide(ctx context.Context, r int) (bool, error) {
	d, err := s.stores[r].Take(ctx, sluice.Request{Key: "k", Rule: s.rule, N: 1})
	return d.Allowed, err
}

func (s *regionsStores) tick(ctx context.Context, t time.Duration) error {
	for r := range s.stores {
		if t < s.nextAt[r] {
			continue
		}
		s.nextAt[r] = t + s.every[r]
		if err := s.stores[r].Sync(ctx); err != nil && !errors.Is(err, errCut) {
			return err
		}
	}
	if s.onSync != nil {
		s.onSync(t)
	}
	return nil
}

func (s *regionsStores) close() {
	for _, st := range s.stores {
		_ = st.Close()
	}
	for _, m := range s.mem {
		_ = m.Close()
	}
}

var errCut = errors.New("simulate: regions: cut off")

// newRegionsAsync builds Async mode: each region reads the others' counters as they were
// the delay to them ago (recorded after each of their syncs), and not at all across a cut.
func newRegionsAsync(clock *sluicetest.ManualClock, rule sluice.Rule, mem []*memory.Store) (regionDecider, error) {
	start := clock.Now()
	elapsed := func() time.Duration { return clock.Now().Sub(start) }
	logs := make([]*countLog, len(mem))
	for i := range logs {
		logs[i] = &countLog{store: mem[i], elapsed: elapsed}
	}
	s := &regionsStores{mem: mem, rule: rule, elapsed: elapsed}
	for i, name := range regionNames {
		var rs []regions.Region
		for j, other := range regionNames {
			st := sluice.Store(logs[j])
			if j != i {
				st = &delayedCounts{log: logs[j], from: i, to: j, elapsed: elapsed}
			}
			rs = append(rs, regions.Region{Name: other, Store: st})
		}
		store, err := regions.New(regions.Config{Region: name, Regions: rs, Mode: regions.Async, Interval: regionsInterval,
			Clock: clock, Manual: true})
		if err != nil {
			return nil, err
		}
		s.stores = append(s.stores, store)
		s.nextAt = append(s.nextAt, 0)
		s.every = append(s.every, regionsInterval)
	}
	return s, nil
}

// countLog is a region's own store, recording the totals of its counters after each of its
// syncs, so that the others can read them as they were.
type countLog struct {
	store   *memory.Store
	elapsed func() time.Duration
	mu      sync.Mutex
	history map[countWindow][]countAt
}

type countWindow struct {
	key    string
	length time.Duration
	window int64
}

type countAt struct {
	at    time.Duration
	total int64
}

func (c *countLog) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	return c.store.Take(ctx, req)
}

func (c *countLog) AddWindowCounts(ctx context.Context, batch []sluice.WindowCounts) error {
	if err := c.store.AddWindowCounts(ctx, batch); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.history == nil {
		c.history = map[countWindow][]countAt{}
	}
	t := c.elapsed()
	for _, w := range batch {
		for k, total := range w.Totals {
			cw := countWindow{w.Key, w.Length, w.First + int64(k)}
			c.history[cw] = append(c.history[cw], countAt{t, total})
		}
	}
	return nil
}

// at returns a window's total as it was at t.
func (c *countLog) at(cw countWindow, t time.Duration) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.history[cw]
	i := sort.Search(len(h), func(i int) bool { return h[i].at > t })
	if i == 0 {
		return 0
	}
	return h[i-1].total
}

// delayedCounts is region to's counters as region from reads them.
type delayedCounts struct {
	log      *countLog
	from, to int
	elapsed  func() time.Duration
}

func (d *delayedCounts) Take(context.Context, sluice.Request) (sluice.Decision, error) {
	return sluice.Decision{}, errors.New("simulate: regions: another region's store decides nothing here")
}

func (d *delayedCounts) AddWindowCounts(_ context.Context, batch []sluice.WindowCounts) error {
	t := d.elapsed()
	if cut(d.from, d.to, t) {
		return errCut
	}
	for i := range batch {
		w := &batch[i]
		for k := range w.Totals {
			w.Totals[k] = d.log.at(countWindow{w.Key, w.Length, w.First + int64(k)}, t-regionDelay[d.from][d.to])
		}
	}
	return nil
}

// newRegionsEscrow builds Escrow mode: the coordinator is in eu; a region's syncs happen
// every interval plus its round trip to it, and across a cut not at all.
func newRegionsEscrow(clock *sluicetest.ManualClock, rule sluice.Rule, mem []*memory.Store, res *RegionsResult) (regionDecider, error) {
	start := clock.Now()
	elapsed := func() time.Duration { return clock.Now().Sub(start) }
	coord := regions.NewMemoryCoordinator()
	s := &regionsStores{mem: mem, rule: rule, elapsed: elapsed}
	var rs []regions.Region
	for i, name := range regionNames {
		rs = append(rs, regions.Region{Name: name, Store: mem[i]})
	}
	for i, name := range regionNames {
		store, err := regions.New(regions.Config{Region: name, Regions: rs, Mode: regions.Escrow, Interval: regionsInterval,
			Epoch: regionsEpoch, Clock: clock, Manual: true, Coordinator: cutCoordinator{coord, i, elapsed}})
		if err != nil {
			return nil, err
		}
		s.stores = append(s.stores, store)
		// A sync reaches the coordinator half a round trip late; the next starts when its
		// answer is back.
		s.nextAt = append(s.nextAt, regionDelay[i][0])
		s.every = append(s.every, regionsInterval+2*regionDelay[i][0])
	}
	res.Shares = make([][]int64, len(regionNames))
	s.onSync = func(t time.Duration) {
		if t%(100*time.Millisecond) != 0 {
			return
		}
		res.ShareTimes = append(res.ShareTimes, t)
		for i, st := range s.stores {
			res.Shares[i] = append(res.Shares[i], st.Share("k", rule))
		}
	}
	return s, nil
}

// cutCoordinator is the coordinator (in eu) as region from reaches it: not across a cut.
type cutCoordinator struct {
	regions.Coordinator
	from    int
	elapsed func() time.Duration
}

func (c cutCoordinator) Exchange(ctx context.Context, x *regions.Exchange) error {
	if cut(c.from, 0, c.elapsed()) {
		return errCut
	}
	return c.Coordinator.Exchange(ctx, x)
}

func (c cutCoordinator) Propose(ctx context.Context, ps []regions.Proposal) error {
	if cut(c.from, 0, c.elapsed()) {
		return errCut
	}
	return c.Coordinator.Propose(ctx, ps)
}

// WriteRegions writes the rows of RunRegions as a table.
func WriteRegions(w io.Writer, res *RegionsResult) error {
	if _, err := fmt.Fprintf(w, "%-17s %-8s %-9s %-15s %-9s %-15s %-17s %s\n", "mode", "demand", "admitted", "over_admission", "max_over", "max_over_clear", "needless_denials", "admitted_while_cut_off"); err != nil {
		return err
	}
	for _, r := range res.Rows {
		if _, err := fmt.Fprintf(w, "%-17s %-8d %-9d %-15s %-9d %-15d %-17s %d\n", r.Mode, r.Demand, r.Admitted,
			fmt.Sprintf("%.2f%%", 100*r.OverAdmission), r.MaxOver, r.MaxOverClear, fmt.Sprintf("%.2f%%", 100*r.Needless), r.CutAdmitted); err != nil {
			return err
		}
	}
	return nil
}
