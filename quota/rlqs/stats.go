package rlqs

import "github.com/sluicehq/sluice/config"

// held is what a stream's client was last handed for a bucket, and the demand it reported.
type held struct {
	rule    *config.QuotaRule
	share   int64 // requests per rule period; negative for a blanket rule
	expires int64 // Unix ns
	demand  float64
}

// RuleStats is what the open streams of one Service hold and ask of a quota rule. Rates are
// requests per second.
type RuleStats struct {
	// Domain and Rule name the rule (config.QuotaRule's Domain and Name).
	Domain, Rule string
	// Limit is the rule's limit, per bucket id; 0 for allow_all and deny_all rules.
	Limit float64
	// Buckets is the number of distinct bucket ids of the rule that open streams report.
	Buckets int
	// Assigned is the sum of the unexpired shares handed to the open streams, over every
	// bucket id of the rule.
	Assigned float64
	// Demand is the sum of the request rates (allowed plus denied) the open streams last
	// reported over a positive elapsed time.
	Demand float64
}

// Stats returns, for each quota rule of the rules in force (in domain, then file order) and
// each older rule that open streams still hold assignments of, what this Service's open
// streams hold and ask of it. Its cost grows with the streams × buckets open; it is meant
// for a metrics scrape, not for the report path.
func (s *Service) Stats() []RuleStats {
	type ruleKey struct{ domain, rule string }
	var out []RuleStats
	index := make(map[ruleKey]int)
	at := func(domain, rule string) *RuleStats {
		k := ruleKey{domain, rule}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, RuleStats{Domain: domain, Rule: rule})
		}
		return &out[i]
	}
	rules := s.rules()
	for _, d := range rules.Domains() {
		for _, r := range rules.Domain(d).QuotaRules() {
			if rs := at(r.Domain, r.Name); rs.Limit == 0 && r.Share.Period > 0 {
				rs.Limit = float64(r.Share.Limit) / r.Share.Period.Seconds()
			}
		}
	}
	s.mu.Lock()
	streams := make([]*stream, 0, len(s.streams))
	for st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	now := s.clock.Now().UnixNano()
	buckets := make(map[ruleKey]map[string]struct{})
	for _, st := range streams {
		st.mu.Lock()
		for key, sb := range st.subs {
			h := sb.last
			if h.rule == nil {
				continue
			}
			rs := at(h.rule.Domain, h.rule.Name)
			rs.Demand += h.demand
			if h.share > 0 && h.expires > now && h.rule.Share.Period > 0 {
				rs.Assigned += float64(h.share) / h.rule.Share.Period.Seconds()
			}
			k := ruleKey{h.rule.Domain, h.rule.Name}
			if buckets[k] == nil {
				buckets[k] = make(map[string]struct{})
			}
			buckets[k][key] = struct{}{} // the rule's domain is the stream's
		}
		st.mu.Unlock()
	}
	for k, b := range buckets {
		out[index[k]].Buckets = len(b)
	}
	return out
}
