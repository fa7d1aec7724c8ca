package replay

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// ruleStats is what a replay learns of one rule: rule j of a configured limit.
type ruleStats struct {
	limit *config.Limit
	j     int
	rule  sluice.Rule // zero for a block (requests_per_unit: 0)
	name  string

	requests, units int64
	denials, agreed int64 // units a rule denied, and of them those the exact reference denies too
	violations      int64 // units admitted that the exact reference would deny
	firstDenial     int64
	maxAdmitted     int64 // the most units admitted in a trailing period, any client
	clientsDenied   int64
	clients         *clientTable
	series          *series
}

func newRuleStats(l *config.Limit, j int, cfg *Config, start int64) *ruleStats {
	s := &ruleStats{limit: l, j: j, name: l.Name, series: newSeries(cfg.Points, start)}
	if j < len(l.RuleNames) {
		s.name = l.RuleNames[j]
	}
	period := int64(l.Unit.Duration()) * int64(max(l.UnitMultiplier, 1)) // a block's
	if j < len(l.Rules) {
		s.rule = l.Rules[j]
		period = int64(s.rule.Period)
	}
	s.clients = newClientTable(period, cfg.MaxClients, cfg.Top)
	return s
}

// observe counts one request of n units of the client key at instant at: denied says
// whether this rule denied it, consumed whether the units were taken (the request passed
// its domain, or this limit is decided on its own and admitted it).
func (s *ruleStats) observe(key string, at, n int64, denied, consumed bool) {
	c := s.clients.get(key, at)
	s.requests++
	s.units += n
	c.requests++
	c.w.offered.Add(at, n)
	c.peak = max(c.peak, c.w.offered.Count(at))
	exactDenies := true // a block denies everything, as the reference of a limit of 0
	if s.rule.Limit > 0 {
		before := c.w.admitted.Count(at)
		exactDenies = before+n > s.rule.Limit
		if consumed && !denied {
			c.w.admitted.Add(at, n)
			s.maxAdmitted = max(s.maxAdmitted, before+n)
			if exactDenies {
				s.violations++
			}
		}
	}
	s.series.add(at, n, denied)
	if !denied {
		return
	}
	s.denials++
	c.denials++
	if exactDenies {
		s.agreed++
		c.agreed++
	}
	if s.firstDenial == 0 {
		s.firstDenial = at
	}
	if c.firstDenial == 0 {
		c.firstDenial = at
		s.clientsDenied++
	}
}
