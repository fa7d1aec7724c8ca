package simulate

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// sampler holds the plot's sample instants and the series gathered so far.
type sampler struct {
	at     []int64
	series Series
}

// newSampler samples the busiest client at evenly spaced instants over the first
// cfg.PlotPeriods periods of the run, and the exact count of its requests there.
func newSampler(trace Trace, cfg Config) *sampler {
	samples, periods := cfg.Samples, cfg.PlotPeriods
	if samples <= 0 {
		samples = 400
	}
	if periods <= 0 {
		periods = 10
	}
	count := make([]int64, trace.Clients)
	for _, ev := range trace.Events {
		count[ev.Client] += ev.N
	}
	var busiest int32
	for c := range count {
		if count[c] > count[busiest] {
			busiest = int32(c)
		}
	}
	span := min(trace.End-trace.Start, int64(periods)*int64(cfg.Scenario.Period))
	s := &sampler{series: Series{Client: busiest}}
	for i := 1; i <= samples; i++ {
		off := span * int64(i) / int64(samples)
		s.at = append(s.at, trace.Start+off)
		s.series.Times = append(s.series.Times, time.Duration(off))
	}
	w := Window{Period: int64(cfg.Scenario.Period)}
	j := 0
	for _, ev := range trace.Events {
		for j < len(s.at) && s.at[j] < ev.At {
			s.series.Offered = append(s.series.Offered, w.Count(s.at[j]))
			j++
		}
		if ev.Client == busiest {
			w.Add(ev.At, ev.N)
		}
	}
	for ; j < len(s.at); j++ {
		s.series.Offered = append(s.series.Offered, w.Count(s.at[j]))
	}
	return s
}

// estimateRates runs the rate estimation view of a counting variant: every request, admitted or
// not, counts toward the rate, as in Cloudflare's measurement. For each request it compares the
// variant's count of the client's requests in the trailing period (including this one) with the
// exact count; the decision is wrong when one is above the limit and the other is not. It
// returns the fraction of wrong decisions, the mean |estimate - exact| / limit, and the
// variant's count of the busiest client at the sample instants.
func estimateRates(trace Trace, sc Scenario, v Variant, s *sampler, p *progress) (wrong, mae float64, counted []int64) {
	limit, period := sc.Limit, int64(sc.Period)
	perClient := make([]int64, trace.Clients)
	for _, ev := range trace.Events {
		perClient[ev.Client] += ev.N
	}
	// A rule whose limit is never reached, so the state counts every request. The sliding log
	// keeps one timestamp per unit, so its limit is the client's total.
	rules := func(c int32) sluice.Rule {
		r := v.Rule(sluice.MaxLimit, sc.Period)
		if v.Algorithm == sluice.AlgorithmSlidingLog {
			r.Limit = min(sluice.MaxSlidingLogLimit, max(1, perClient[c]))
		}
		return r
	}
	states := make([]algorithm.State, trace.Clients)
	params := make([]algorithm.Params, trace.Clients) // rules(c) compiled, set with states[c]
	exact := make([]Window, trace.Clients)
	for i := range exact {
		exact[i].Period = period
	}
	focus := s.series.Client
	peek := func(at int64) int64 {
		st := states[focus]
		if st == nil {
			return 0
		}
		pr := &params[focus]
		d := st.Take(at, pr, 0, 0)
		return pr.Rule.Limit - d.Remaining
	}
	var wrongs int64
	var absErr float64
	for _, ev := range trace.Events {
		for len(counted) < len(s.at) && s.at[len(counted)] < ev.At {
			counted = append(counted, peek(s.at[len(counted)]))
		}
		st := states[ev.Client]
		if st == nil {
			st = algorithm.New(v.Algorithm)
			states[ev.Client] = st
			params[ev.Client] = algorithm.Compile(rules(ev.Client))
		}
		pr := &params[ev.Client]
		d := st.Take(ev.At, pr, ev.N, 0)
		est := pr.Rule.Limit - d.Remaining
		w := &exact[ev.Client]
		w.Add(ev.At, ev.N)
		ex := w.Count(ev.At)
		if (est > limit) != (ex > limit) {
			wrongs++
		}
		absErr += float64(abs(est - ex))
		p.step()
	}
	for len(counted) < len(s.at) {
		counted = append(counted, peek(s.at[len(counted)]))
	}
	n := float64(max(1, len(trace.Events)))
	return float64(wrongs) / n, absErr / n / float64(limit), counted
}
