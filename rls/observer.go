package rls

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/distributed"
)

// Observer is told what an Engine decides and does, for metrics: package server/rlsmetrics
// counts it in Prometheus series (Sluice's and envoyproxy/ratelimit's), package server also
// in the peer's statsd stats; the engine counts nothing itself. Its methods are called on the
// decision path of many requests at once: they must be cheap, must not block, and must be
// safe for concurrent use. Config.Observer nil observes nothing.
type Observer interface {
	// Limit returns the observer of one configured limit's decisions. It is called at the
	// limit's first decision under a rules set, so an observer creates its series on first
	// use; a limit carried unchanged into the next rules set keeps its LimitObserver.
	Limit(l *config.Limit) LimitObserver
	// Domain returns the observer of the requests of a domain of the rules that match no
	// limit or bring their own (a limit override); it is called at the first such request
	// under a rules set.
	Domain(name string) DomainObserver
	// KeyDecided is called for each decision of the key form (Engine.DecideKey).
	KeyDecided(allowed bool)
	// StoreError is called for each store call that failed: answered unavailable by the
	// engine (byFallback false), or decided by the fallback's policy, and the fallback's
	// failed probes and heartbeats (true).
	StoreError(byFallback bool)
	// RulesApplied is called when rules set c is in force (initial: the first, at New);
	// RulesRejected when a rules set is refused (initial: at New, which then fails).
	RulesApplied(c *config.Config, initial bool)
	RulesRejected(initial bool)
	// UnknownDomain is called for each request naming a domain no rules define.
	UnknownDomain()
	// GlobalShadow is called for each request over its limit answered OK by
	// Config.GlobalShadowMode.
	GlobalShadow()
	// UnknownCriticality is called for each request whose criticality class is not one of
	// the four (decided as CRITICAL).
	UnknownCriticality()
	// CircuitChanged is called when the circuit of the store's fallback
	// (StoreConfig.Fallback) opens or closes.
	CircuitChanged(to distributed.Circuit)
}

// LimitObserver is told the decisions of one configured limit (Observer.Limit).
type LimitObserver interface {
	Decided(o *Outcome)
}

// DomainObserver is told a domain's requests that match no limit (NoRule) and the
// decisions of its limit overrides (Override; Outcome.Limit is nil).
type DomainObserver interface {
	NoRule()
	Override(o *Outcome)
}

// Outcome is one descriptor's decision as an Observer is told it. It and what it refers to
// (the request) are valid only during the call: an observer must not keep it.
type Outcome struct {
	// Limit is the configured limit the descriptor matched (nil for a limit override);
	// Domain its domain in the rules, Entries the descriptor's entries (config.MetricKey
	// builds the peer's stats key of a detailed_metric or value_to_metric limit from them)
	// and Key its store key (the request's values as sent).
	Limit   *config.Limit
	Domain  *config.Domain
	Entries []Entry
	Key     string
	// Unlimited: the limit admits everything, no store call; the fields below are zero.
	Unlimited bool
	// Hits is the units asked (0: a peek); Refund says they were given back
	// (is_negative_hits).
	Hits   int64
	Refund bool
	// Over reports that the descriptor is over its limit (in shadow mode too), Shadow that
	// its limit is in shadow mode, Block that it blocks every request (requests_per_unit 0).
	Over, Shadow, Block bool
	// Decision is the descriptor's decision under its binding rule.
	Decision sluice.Decision
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Limit(*config.Limit) LimitObserver  { return nopObserver{} }
func (nopObserver) Domain(string) DomainObserver       { return nopObserver{} }
func (nopObserver) KeyDecided(bool)                    {}
func (nopObserver) StoreError(bool)                    {}
func (nopObserver) RulesApplied(*config.Config, bool)  {}
func (nopObserver) RulesRejected(bool)                 {}
func (nopObserver) UnknownDomain()                     {}
func (nopObserver) GlobalShadow()                      {}
func (nopObserver) UnknownCriticality()                {}
func (nopObserver) CircuitChanged(distributed.Circuit) {}
func (nopObserver) Decided(*Outcome)                   {}
func (nopObserver) NoRule()                            {}
func (nopObserver) Override(*Outcome)                  {}
