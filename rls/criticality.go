package rls

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// CriticalityEntry is the descriptor entry key that carries a request's criticality class: a
// descriptor made of this one entry (Envoy: a request_headers action mapping, say, the
// x-criticality header to descriptor_key "criticality") sets the class of every limit of the
// request; without it the class is CRITICAL. Only limits with `criticality` shares use it.
const CriticalityEntry = "criticality"

// requestClass returns the class a request carries (CriticalityEntry), CRITICAL by default.
// An unknown class is CRITICAL too: counted, and logged the first time.
func (e *Engine) requestClass(req *Request) sluice.Criticality {
	for i := range req.Descriptors {
		d := &req.Descriptors[i]
		if len(d.Entries) != 1 || d.Entries[0].Key != CriticalityEntry {
			continue
		}
		return e.parseClass(d.Entries[0].Value)
	}
	return sluice.Critical
}

// parseClass reads a class name; unknown: CRITICAL, counted, logged once.
func (e *Engine) parseClass(v string) sluice.Criticality {
	c, ok := sluice.ParseCriticality(v)
	if !ok {
		e.obs.UnknownCriticality()
		e.unknownOnce.Do(func() {
			e.log.Warn("unknown criticality class, decided as CRITICAL (logged once; counted in sluice_criticality_unknown_total)", "value", quote(v))
		})
	}
	return c
}

// holdback is what check j of the item must leave for its class, when its rule has shares.
func (it *item) holdback(j int, n int64) int64 {
	if n <= 0 || it.overridden() || it.limit == nil {
		return 0
	}
	if sh := it.limit.SharesOf(j); sh != nil {
		return sh.Holdback(it.class, it.rule(j).Capacity())
	}
	return 0
}

// classOf is the class of a /v1/allow key-form request ("" is CRITICAL).
func (e *Engine) classOf(v string) sluice.Criticality {
	if v == "" {
		return sluice.Critical
	}
	return e.parseClass(v)
}

// classLimit gives a rule supplied by a request with a criticality the default shares, so
// its class applies; a named limit keeps its configured shares.
func (e *Engine) classLimit(lim *config.Limit, class string) *config.Limit {
	if class == "" || lim.Shares != nil || len(lim.Rules) != 1 || lim.Name != "" {
		return lim
	}
	shares := sluice.DefaultShares
	return &config.Limit{Rules: lim.Rules, Shares: []*sluice.Shares{&shares}}
}
