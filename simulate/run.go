package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// Config is one simulation: a scenario's trace replayed through every variant in every mode.
type Config struct {
	// Scenario is the traffic and the per-client rule's limit and period.
	Scenario Scenario
	// Duration overrides the scenario's duration when positive.
	Duration time.Duration
	// Seed seeds the traffic and the skewed routing.
	Seed uint64
	// Variants are the algorithms measured (default DefaultVariants).
	Variants []Variant
	// Modes are the ways of deciding (default Single).
	Modes []Mode
	// Progress, when set, is called now and then with the work done and the total, in
	// request decisions.
	Progress func(done, total int64)
	// Samples is the number of instants the plot series are sampled at (default 400), over
	// the first PlotPeriods periods of the run (default 10).
	Samples, PlotPeriods int
	// Store, when set, builds the store the instances of a distributed mode share, once per
	// algorithm and mode, on the run's virtual clock, with the Closer that releases it after
	// use (stores.Open's results); each call must return a store with fresh state (e.g. Redis
	// under a new key prefix). It must implement sluice.WindowCounter for the async modes and
	// sluice.Heartbeater for the fallback heartbeats. Default: a memory store.
	Store func(clock sluice.Clock) (sluice.Store, io.Closer, error)
}

// Result is the outcome of Run: the table and the series the plots are drawn from.
type Result struct {
	Rows []Row
	// Series are sampled for the busiest client over the start of the run.
	Series Series
	// Limit is the per-client limit the series are judged against.
	Limit int64
	// Scenario names the scenario.
	Scenario string
}

// Series are values sampled at the same instants for one client (the busiest).
type Series struct {
	// Client is the sampled client; Times are the sample instants as offsets from the start.
	Client int32
	Times  []time.Duration
	// Offered is the exact count of all the client's requests in the trailing period.
	Offered []int64
	// Counted is, per counting variant, its count of all the client's requests (the rate
	// estimation view), in variant order.
	Counted []NamedSeries
	// Admitted is, per variant in the first mode, the exact count of the units it admitted
	// for the client in the trailing period.
	Admitted []NamedSeries
	// Shares and FairShares are, in the first quota mode run (first variant), each
	// instance's assigned share of the client's limit and its max-min fair share of the
	// demands of the last interval, indexed by instance.
	Shares, FairShares [][]int64
}

// NamedSeries is one line of a plot.
type NamedSeries struct {
	Name   string
	Values []int64
}

// Run replays the scenario's trace through every variant and mode and measures them. It is
// deterministic: the same Config gives the same Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Scenario.generate == nil {
		return nil, errors.New("simulate: scenario: not set (use ScenarioByName)")
	}
	if len(cfg.Variants) == 0 {
		cfg.Variants = DefaultVariants()
	}
	if len(cfg.Modes) == 0 {
		cfg.Modes = []Mode{Single()}
	}
	for _, m := range cfg.Modes {
		if err := m.validate(); err != nil {
			return nil, err
		}
	}
	for _, v := range cfg.Variants {
		if err := v.Rule(cfg.Scenario.Limit, cfg.Scenario.Period).Validate(); err != nil {
			return nil, fmt.Errorf("simulate: algorithm %s: %w", v.Name(), err)
		}
	}
	trace, err := cfg.Scenario.Generate(cfg.Duration, cfg.Seed)
	if err != nil {
		return nil, err
	}
	s := newSampler(trace, cfg)
	res := &Result{Limit: cfg.Scenario.Limit, Scenario: cfg.Scenario.Name}
	counting := 0
	for _, v := range cfg.Variants {
		if v.Counting() {
			counting++
		}
	}
	p := &progress{fn: cfg.Progress,
		total: int64(len(trace.Events)) * int64(len(cfg.Variants)*len(cfg.Modes)+counting)}
	estimates := make(map[string][2]float64)
	for _, v := range cfg.Variants {
		if !v.Counting() {
			continue
		}
		wrong, mae, counted := estimateRates(trace, cfg.Scenario, v, s, p)
		estimates[v.Name()] = [2]float64{wrong, mae}
		s.series.Counted = append(s.series.Counted, NamedSeries{Name: v.Name(), Values: counted})
	}
	for mi, m := range cfg.Modes {
		for _, v := range cfg.Variants {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			row, admitted, err := measure(ctx, trace, cfg, v, m, s, p)
			if err != nil {
				return nil, err
			}
			if e, ok := estimates[v.Name()]; ok {
				row.RateEstimationWrong, row.RateEstimationError = e[0], e[1]
			}
			res.Rows = append(res.Rows, row)
			if mi == 0 {
				s.series.Admitted = append(s.series.Admitted, NamedSeries{Name: v.Name(), Values: admitted})
			}
		}
	}
	res.Series = s.series
	p.done = p.total
	p.report()
	return res, nil
}

// progress reports work done every so often.
type progress struct {
	fn          func(done, total int64)
	done, total int64
}

func (p *progress) step() {
	p.done++
	if p.done&0xffff == 0 {
		p.report()
	}
}

func (p *progress) report() {
	if p.fn != nil {
		p.fn(p.done, p.total)
	}
}

// decider makes the decisions of one variant in one mode.
type decider interface {
	decide(ctx context.Context, ev Event, rule sluice.Rule) (sluice.Decision, error)
	close() error
}

// measure replays the trace through one variant in one mode.
func measure(ctx context.Context, trace Trace, cfg Config, v Variant, m Mode, s *sampler, p *progress) (Row, []int64, error) {
	rule := v.Rule(cfg.Scenario.Limit, cfg.Scenario.Period)
	limit, period := rule.Limit, int64(rule.Period)
	var dec decider
	if m.Build == nil {
		dec = &single{states: make([]algorithm.State, trace.Clients), algo: v.Algorithm}
	} else {
		d, err := newFleet(trace, cfg, m)
		if err != nil {
			return Row{}, nil, err
		}
		dec = d
		if q := quotaOf(dec); q != nil {
			q.focus = d.keys[s.series.Client]
		}
	}
	row := Row{Scenario: cfg.Scenario.Name, Algorithm: v.Name(), Mode: m.Name, Nodes: m.Nodes,
		Routing: string(m.Routing), Requests: int64(len(trace.Events)),
		MeanAbsError: nan, RateEstimationWrong: nan, RateEstimationError: nan,
		OverAdmissionOutage: nan, OverAdmissionRecovery: nan, FairnessError: nan}
	if m.Build == nil {
		row.Routing = "-"
	} else if row.Routing == "" {
		row.Routing = string(RoundRobin)
	}
	admitted := make([]Window, trace.Clients)
	for i := range admitted {
		admitted[i].Period = period
	}
	focus := &admitted[s.series.Client]
	samples := make([]int64, 0, len(s.at))
	var allowed, violations, needless, errs, decided int64
	var maxCount, maxOutage, maxRecovery int64
	from, to, outage := m.outageSpan(trace)
	var absErr float64
	for _, ev := range trace.Events {
		for len(samples) < len(s.at) && s.at[len(samples)] < ev.At {
			samples = append(samples, focus.Count(s.at[len(samples)]))
		}
		w := &admitted[ev.Client]
		before := w.Count(ev.At)
		d, err := dec.decide(ctx, ev, rule)
		p.step()
		if err != nil {
			if errors.Is(err, sluice.ErrStoreUnavailable) {
				errs++
				continue
			}
			return Row{}, nil, fmt.Errorf("simulate: %s in mode %s: %w", v.Name(), m.Name, err)
		}
		decided++
		if d.Allowed {
			allowed++
			w.Add(ev.At, ev.N)
			maxCount = max(maxCount, before+ev.N)
			switch {
			case !outage:
			case ev.At >= from && ev.At < to:
				maxOutage = max(maxOutage, before+ev.N)
			case ev.At >= to && ev.At < to+period:
				maxRecovery = max(maxRecovery, before+ev.N)
			}
			if before+ev.N > limit {
				violations++
			}
		} else if before+ev.N <= limit {
			needless++
		}
		if v.Counting() {
			est := d.Capacity - d.Remaining
			if d.Allowed {
				est -= ev.N
			}
			absErr += float64(abs(est - before))
		}
	}
	for len(samples) < len(s.at) {
		samples = append(samples, focus.Count(s.at[len(samples)]))
	}
	if q := quotaOf(dec); q != nil {
		row.FairnessError = q.fairnessError()
		if s.series.Shares == nil {
			s.series.Shares, s.series.FairShares = q.sharesAt(s.at)
		}
	}
	if err := dec.close(); err != nil {
		return Row{}, nil, err
	}
	n := float64(max(1, len(trace.Events)))
	row.AdmittedFraction = float64(allowed) / n
	row.OverAdmission = float64(maxCount) / float64(limit)
	if outage {
		row.OverAdmissionOutage = float64(maxOutage) / float64(limit)
		row.OverAdmissionRecovery = float64(maxRecovery) / float64(limit)
	}
	row.LimitViolations = float64(violations) / n
	row.NeedlessDenials = float64(needless) / n
	row.Errors = float64(errs) / n
	if v.Counting() {
		row.MeanAbsError = absErr / float64(max(1, decided)) / float64(limit)
	}
	return row, samples, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// single decides on algorithm states directly, one per client.
type single struct {
	states []algorithm.State
	algo   sluice.Algorithm
	params *algorithm.Params // the last rule, compiled
}

func (s *single) decide(_ context.Context, ev Event, rule sluice.Rule) (sluice.Decision, error) {
	st := s.states[ev.Client]
	if st == nil {
		st = algorithm.New(s.algo)
		s.states[ev.Client] = st
	}
	if s.params == nil || s.params.Rule != rule {
		p := algorithm.Compile(rule)
		s.params = &p
	}
	return st.Take(ev.At, s.params, ev.N, 0), nil
}

func (*single) close() error { return nil }

// fleet decides through Nodes limiters over stores built from one shared store (memory by
// default), all on one virtual clock.
type fleet struct {
	clock       *sluicetest.ManualClock
	shared      sluice.Store
	sharedView  sluice.Store // shared, or shared behind the outage
	closeShared io.Closer    // releases shared
	stores      []sluice.Store
	limiters    []*sluice.Limiter
	router      *Router
	keys        []string
	chores      *Chores
}

// outageSpan returns the instants the mode's outage starts and ends in the trace.
func (m Mode) outageSpan(trace Trace) (from, to int64, ok bool) {
	if m.Outage.To <= m.Outage.From {
		return 0, 0, false
	}
	span := float64(trace.End - trace.Start)
	return trace.Start + int64(m.Outage.From*span), trace.Start + int64(m.Outage.To*span), true
}

func newFleet(trace Trace, cfg Config, m Mode) (*fleet, error) {
	clock := sluicetest.NewManualClock(time.Unix(0, trace.Start).UTC())
	var mem sluice.Store
	var closeMem io.Closer
	var err error
	if cfg.Store != nil {
		mem, closeMem, err = cfg.Store(clock)
	} else {
		var st *memory.Store
		st, err = memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
		mem, closeMem = st, st
	}
	if err != nil {
		return nil, fmt.Errorf("simulate: shared store: %w", err)
	}
	shared := mem
	if from, to, ok := m.outageSpan(trace); ok {
		shared = &outageStore{Store: mem, clock: clock, from: from, to: to}
	}
	routing := m.Routing
	if routing == "" {
		routing = RoundRobin
	}
	d := &fleet{clock: clock, shared: mem, sharedView: shared, closeShared: closeMem, router: NewRouter(routing, m.Nodes, cfg.Seed),
		keys: make([]string, trace.Clients)}
	for i := range d.keys {
		d.keys[i] = fmt.Sprintf("client-%d", i)
	}
	for node := 0; node < m.Nodes; node++ {
		st, err := m.Build(shared, clock, node)
		if err != nil {
			d.close()
			return nil, fmt.Errorf("simulate: mode %s: node %d: %w", m.Name, node, err)
		}
		d.stores = append(d.stores, st)
		d.limiters = append(d.limiters, sluice.New(st, sluice.WithClock(clock)))
	}
	d.chores = NewChores(m, clock, d.stores, trace.Start)
	return d, nil
}

func (d *fleet) decide(ctx context.Context, ev Event, rule sluice.Rule) (sluice.Decision, error) {
	d.chores.RunUntil(ctx, ev.At)
	node := d.router.Route(ev.Client)
	return d.limiters[node].AllowN(ctx, d.keys[ev.Client], rule, ev.N)
}

func (d *fleet) close() error {
	var errs []error
	seen := map[sluice.Store]bool{d.sharedView: true, d.shared: true}
	for _, st := range d.stores {
		if c, ok := st.(sluice.Closer); ok && !seen[st] {
			seen[st] = true
			errs = append(errs, c.Close())
		}
	}
	errs = append(errs, d.closeShared.Close())
	return errors.Join(errs...)
}
