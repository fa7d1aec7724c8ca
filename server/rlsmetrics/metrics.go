// Package rlsmetrics counts what a descriptor engine (package rls) decides and does in
// Prometheus series: Sluice's (sluice_decisions_total, sluice_store_errors_total, the
// reloads, the live view's gauges, the fallback's state) and envoyproxy/ratelimit's, under its
// names and labels (peer.go). A Metrics is the engine's rls.Observer: package server and
// package proxy give one to the engine they serve. It links no gRPC and no statsd client:
// package server sends the peer's statsd stats through Options.Peer.
//
// The series of a limit are created at its first decision, not when its rules load: a rules
// set of many limits costs no series until they are used.
package rlsmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/rls"
)

// DefaultNearLimitRatio is envoyproxy/ratelimit's NEAR_LIMIT_RATIO default.
const DefaultNearLimitRatio = 0.8

// Options configure a Metrics. The zero value of every field is a documented default.
type Options struct {
	// NearLimitRatio is the share of a limit past which hits count as near_limit in the
	// envoyproxy/ratelimit series (default DefaultNearLimitRatio).
	NearLimitRatio float64
	// ResponseTimeMilliseconds records ratelimit_service_response_time_seconds in whole
	// milliseconds, same name and buckets, as envoyproxy/ratelimit does with
	// PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS=true. Default: seconds.
	ResponseTimeMilliseconds bool
	// Peer, when set, is told envoyproxy/ratelimit's counts too, as they are added to their
	// series (package server sends them as the peer's statsd stats). Nil: none.
	Peer PeerStats
}

// Metrics are the Prometheus series of one engine. Build them with New, pass them as the
// engine's rls.Config.Observer, then Attach the engine. A Metrics is safe for concurrent use.
type Metrics struct {
	reg   prometheus.Registerer
	ratio float64
	peer  *peerMetrics

	decisions    *prometheus.CounterVec // domain, rule, result
	shadow       *prometheus.CounterVec // domain, rule
	storeErrors  prometheus.Counter
	reloads      [2]prometheus.Counter // failure, success
	reloadTime   prometheus.Gauge
	rulesLoaded  prometheus.Gauge
	keyDecisions [2]prometheus.Counter // the key form (DecideKey): over_limit, ok
	unknownClass prometheus.Counter
	changes      *prometheus.CounterVec // to: the fallback's circuit changes (registered by Attach)
}

var _ rls.Observer = (*Metrics)(nil)

// New registers the series on reg (with the Go and process collectors) and returns them.
func New(reg prometheus.Registerer, o Options) (*Metrics, error) {
	m := &Metrics{reg: reg, ratio: o.NearLimitRatio,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_decisions_total",
			Help: "Descriptor decisions by domain, rule (the descriptor's full key, 'override' for request-supplied limits, 'none' when no rule matched) and result (ok, over_limit, unlimited, no_rule)."},
			[]string{"domain", "rule", "result"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_shadow_would_deny_total",
			Help: "Shadow-mode descriptors that were over their limit and answered OK."}, []string{"domain", "rule"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_store_errors_total",
			Help: "Store calls that failed (unavailable, erroring or too slow): decisions answered UNAVAILABLE, and with a fallback the decisions it answered by policy and its failed probes and heartbeats."}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful rules load."}),
		rulesLoaded: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_config_limits",
			Help: "Number of descriptor limits in the current rules."}),
		unknownClass: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_criticality_unknown_total",
			Help: "Requests whose criticality class was not one of CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE, decided as CRITICAL."}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_store_state_changes_total",
			Help: "Changes of the fallback's state, by the state entered (fallback: the store failed; store: it answered a probe)."},
			[]string{"to"}),
	}
	if m.ratio <= 0 {
		m.ratio = DefaultNearLimitRatio
	}
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_config_reloads_total",
		Help: "Rules reloads by result (success, failure); a failed reload keeps the previous rules."}, []string{"result"})
	for _, c := range []prometheus.Collector{m.decisions, m.shadow, m.storeErrors, reloads, m.reloadTime, m.rulesLoaded, m.unknownClass,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.keyDecisions = [2]prometheus.Counter{m.decisions.WithLabelValues("", "key", "over_limit"), m.decisions.WithLabelValues("", "key", "ok")}
	m.reloads = [2]prometheus.Counter{reloads.WithLabelValues("failure"), reloads.WithLabelValues("success")}
	m.changes.WithLabelValues(distributed.CircuitOpen.String())
	m.changes.WithLabelValues(distributed.CircuitClosed.String())
	var err error
	if m.peer, err = newPeerMetrics(reg, o.Peer, o.ResponseTimeMilliseconds); err != nil {
		return nil, err
	}
	return m, nil
}

// Attach registers the series read from e at scrape time: the live view's
// sluice_top_key_rate gauges and, when e opened a store with a fallback, the fallback's
// state (sluice_store_state, sluice_store_state_changes_total,
// sluice_fallback_seconds_total). Call it once, with the engine m observes.
func (m *Metrics) Attach(e *rls.Engine) error {
	cols := []prometheus.Collector{topCollector{e}}
	if fb, ok := e.Fallback(); ok {
		cols = append(cols, m.changes, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_fallback_seconds_total",
			Help: "Time spent deciding by the fallback policy because the store was unavailable."},
			func() float64 { v, _ := e.Fallback(); return v.InFallback.Seconds() }))
		for _, st := range []distributed.Circuit{distributed.CircuitClosed, distributed.CircuitOpen} {
			cols = append(cols, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_store_state",
				Help:        "1 for the state decisions are in: store (the store decides) or fallback (the fallback policy decides; the store is unavailable).",
				ConstLabels: prometheus.Labels{"state": st.String(), "policy": fb.Policy}},
				func() float64 { v, _ := e.Fallback(); return b2f(v.Circuit == st) }))
		}
	}
	for _, c := range cols {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Limit implements rls.Observer: the series of limit l, created now.
func (m *Metrics) Limit(l *config.Limit) rls.LimitObserver {
	return &limitSeries{m: m,
		ok:        m.decisions.WithLabelValues(l.Domain, l.FullKey, "ok"),
		over:      m.decisions.WithLabelValues(l.Domain, l.FullKey, "over_limit"),
		unlimited: m.decisions.WithLabelValues(l.Domain, l.FullKey, "unlimited"),
		shadow:    m.shadow.WithLabelValues(l.Domain, l.FullKey),
		peer:      m.peer.counters(l.FullKey),
	}
}

// Domain implements rls.Observer: the series of domain d's unmatched requests and
// overrides, created now.
func (m *Metrics) Domain(d string) rls.DomainObserver {
	return &domainSeries{m: m,
		noRule:     m.decisions.WithLabelValues(d, "none", "no_rule"),
		overrideOK: m.decisions.WithLabelValues(d, "override", "ok"),
		overrideNo: m.decisions.WithLabelValues(d, "override", "over_limit"),
		peer:       m.peer.counters(d + ".override"),
	}
}

// KeyDecided implements rls.Observer.
func (m *Metrics) KeyDecided(allowed bool) { m.keyDecisions[b2i(allowed)].Inc() }

// StoreError implements rls.Observer: sluice_store_errors_total and, for a failure answered
// unavailable, the peer's redis_error.
func (m *Metrics) StoreError(byFallback bool) {
	m.storeErrors.Inc()
	if !byFallback {
		m.peer.redisError.Inc()
	}
}

// RulesApplied implements rls.Observer.
func (m *Metrics) RulesApplied(c *config.Config, initial bool) {
	if !initial {
		m.reloads[1].Inc()
	}
	m.peer.configLoadSuccess.Inc()
	m.reloadTime.Set(float64(time.Now().UnixNano()) / 1e9)
	m.rulesLoaded.Set(float64(len(c.Limits())))
}

// RulesRejected implements rls.Observer.
func (m *Metrics) RulesRejected(initial bool) {
	if !initial {
		m.reloads[0].Inc()
	}
	m.peer.configLoadError.Inc()
}

// UnknownDomain implements rls.Observer.
func (m *Metrics) UnknownDomain() { m.peer.unknownDomains.Inc() }

// GlobalShadow implements rls.Observer.
func (m *Metrics) GlobalShadow() { m.peer.globalShadow.Inc() }

// UnknownCriticality implements rls.Observer.
func (m *Metrics) UnknownCriticality() { m.unknownClass.Inc() }

// CircuitChanged implements rls.Observer.
func (m *Metrics) CircuitChanged(to distributed.Circuit) {
	m.changes.WithLabelValues(to.String()).Inc()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// limitSeries are the series of one limit, looked up once (Metrics.Limit) so that a
// decision does no label lookup.
type limitSeries struct {
	m                           *Metrics
	ok, over, unlimited, shadow prometheus.Counter
	peer                        peerCounters // envoyproxy/ratelimit's series of the limit's FullKey
}

// Decided implements rls.LimitObserver: the decision in Sluice's series and in the peer's.
func (s *limitSeries) Decided(o *rls.Outcome) {
	if o.Unlimited {
		s.unlimited.Inc()
		return
	}
	switch {
	case o.Over && o.Shadow:
		s.shadow.Inc()
		s.ok.Inc()
	case o.Over:
		s.over.Inc()
	default:
		s.ok.Inc()
	}
	l, peer := o.Limit, s.peer
	if l.DetailedMetric || l.ValueToMetric {
		peer = s.m.peer.counters(config.MetricKey(o.Domain, o.Entries, l))
	}
	peer.add(PeerCountsOf(o, s.m.ratio))
	if l.DetailedMetric {
		result := "ok"
		if o.Over && !o.Shadow {
			result = "over_limit"
		}
		s.m.decisions.WithLabelValues(l.Domain, o.Key, result).Inc()
	}
}

// domainSeries are the series of one domain's unmatched requests and overrides.
type domainSeries struct {
	m                              *Metrics
	noRule, overrideOK, overrideNo prometheus.Counter
	peer                           peerCounters // envoyproxy/ratelimit's series of limit overrides
}

// NoRule implements rls.DomainObserver.
func (s *domainSeries) NoRule() { s.noRule.Inc() }

// Override implements rls.DomainObserver.
func (s *domainSeries) Override(o *rls.Outcome) {
	if o.Over {
		s.overrideNo.Inc()
	} else {
		s.overrideOK.Inc()
	}
	s.peer.add(PeerCountsOf(o, s.m.ratio))
}
