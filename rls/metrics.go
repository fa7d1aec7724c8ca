package rls

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicehq/sluice/config"
)

// metrics are the engine's Prometheus collectors, registered on the engine's registry.
type metrics struct {
	decisions    *prometheus.CounterVec // domain, rule, result
	shadow       *prometheus.CounterVec // domain, rule
	storeErrors  prometheus.Counter
	reloads      *prometheus.CounterVec // result
	reloadTime   prometheus.Gauge
	rulesLoaded  prometheus.Gauge
	keyDecisions [2]prometheus.Counter // the key form (DecideKey): over_limit, ok
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_decisions_total",
			Help: "Descriptor decisions by domain, rule (the descriptor's full key, 'override' for request-supplied limits, 'none' when no rule matched) and result (ok, over_limit, unlimited, no_rule)."},
			[]string{"domain", "rule", "result"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_shadow_would_deny_total",
			Help: "Shadow-mode descriptors that were over their limit and answered OK."}, []string{"domain", "rule"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_store_errors_total",
			Help: "Store calls that failed (unavailable, erroring or too slow): decisions answered UNAVAILABLE, and with a fallback the decisions it answered by policy and its failed probes and heartbeats."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_config_reloads_total",
			Help: "Rules reloads by result (success, failure); a failed reload keeps the previous rules."}, []string{"result"}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful rules load."}),
		rulesLoaded: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_config_limits",
			Help: "Number of descriptor limits in the current rules."}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.shadow, m.storeErrors,
		m.reloads, m.reloadTime, m.rulesLoaded,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.keyDecisions = [2]prometheus.Counter{m.decisions.WithLabelValues("", "key", "over_limit"), m.decisions.WithLabelValues("", "key", "ok")}
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	return m, nil
}

// limitCounters are the precomputed counters of one limit, so the hot path does no label
// lookups.
type limitCounters struct {
	ok, over, unlimited, shadow prometheus.Counter
}

// domainCounters are the counters of requests in a domain that match no configured limit.
type domainCounters struct {
	noRule                 prometheus.Counter
	overrideOK, overrideNo prometheus.Counter
	peerOverride           peerCounters // envoyproxy/ratelimit's series of limit overrides
}

func (m *metrics) limitCounters(l *config.Limit) limitCounters {
	return limitCounters{
		ok:        m.decisions.WithLabelValues(l.Domain, l.FullKey, "ok"),
		over:      m.decisions.WithLabelValues(l.Domain, l.FullKey, "over_limit"),
		unlimited: m.decisions.WithLabelValues(l.Domain, l.FullKey, "unlimited"),
		shadow:    m.shadow.WithLabelValues(l.Domain, l.FullKey),
	}
}

func (m *metrics) domainCounters(domain string) *domainCounters {
	return &domainCounters{
		noRule:     m.decisions.WithLabelValues(domain, "none", "no_rule"),
		overrideOK: m.decisions.WithLabelValues(domain, "override", "ok"),
		overrideNo: m.decisions.WithLabelValues(domain, "override", "over_limit"),
	}
}
