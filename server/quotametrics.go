package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/quota/rlqs"
)

// quotaMetrics are the RLQS quota service's Prometheus series: the counters and the
// histogram are fed by the service's Observer hooks (this type implements rlqs.Observer),
// the gauges are read from the service at scrape time (quotaCollector). Every label comes
// from the rules or from a small fixed set, so the cardinality is bounded by the rules.
type quotaMetrics struct {
	reports, usages *prometheus.CounterVec // domain ("" for a domain the rules do not define)
	duration        prometheus.Observer
	rejected        []prometheus.Counter // by rlqs.Reason
	actions         []prometheus.Counter // by rlqs.ActionKind
	stateErrors     prometheus.Counter
	stateRetries    prometheus.Counter
	uncovered       *prometheus.CounterVec // domain, as reports
}

func newQuotaMetrics(reg prometheus.Registerer, s *Server) (*quotaMetrics, error) {
	m := &quotaMetrics{
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rlqs_reports_total",
			Help: "RLQS usage report messages answered, by domain ('' for a domain the rules do not define)."}, []string{"domain"}),
		usages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rlqs_bucket_reports_total",
			Help: "RLQS bucket usages (one per bucket of a report message) answered, by domain."}, []string{"domain"}),
	}
	duration := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_rlqs_report_duration_seconds",
		Help:    "Time to validate one RLQS report message and allocate its buckets (quota state round trips included).",
		Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}})
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rlqs_rejected_total",
		Help: "RLQS streams refused or ended for bad input or a server limit, by gRPC code and reason."}, []string{"code", "reason"})
	actions := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rlqs_actions_total",
		Help: "RLQS bucket actions delivered, by kind: assignment (new or renewed), abandon, expire (TTL 0 before a stop)."}, []string{"kind"})
	m.stateErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_rlqs_state_errors_total",
		Help: "RLQS quota state calls that failed (--quota-store unreachable, or a bucket too contended): the bucket got no answer."})
	m.stateRetries = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_rlqs_state_retries_total",
		Help: "RLQS quota state transactions that conflicted with another replica's write to the bucket and were retried (--quota-store redis)."})
	m.uncovered = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_rlqs_uncovered_bucket_reports_total",
		Help: "RLQS bucket usages that no quota rule covers, by domain ('' for a domain the rules do not define): the client gets no assignment and decides by its no-assignment behaviour."}, []string{"domain"})
	for _, c := range []prometheus.Collector{m.reports, m.usages, duration, rejected, actions, m.stateErrors, m.stateRetries, m.uncovered, quotaCollector{s}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.duration = duration
	for _, r := range rlqs.Reasons() {
		m.rejected = append(m.rejected, rejected.WithLabelValues(r.Code().String(), r.String()))
	}
	for _, k := range rlqs.ActionKinds() {
		m.actions = append(m.actions, actions.WithLabelValues(k.String()))
	}
	return m, nil
}

// Reported implements rlqs.Observer.
func (m *quotaMetrics) Reported(domain string, usages int, took time.Duration) {
	m.reports.WithLabelValues(domain).Inc()
	m.usages.WithLabelValues(domain).Add(float64(usages))
	m.duration.Observe(took.Seconds())
}

// Rejected implements rlqs.Observer.
func (m *quotaMetrics) Rejected(r rlqs.Reason) {
	if int(r) < len(m.rejected) {
		m.rejected[r].Inc()
	}
}

// Sent implements rlqs.Observer.
func (m *quotaMetrics) Sent(kind rlqs.ActionKind, n int) {
	if int(kind) < len(m.actions) {
		m.actions[kind].Add(float64(n))
	}
}

// StateError implements rlqs.Observer.
func (m *quotaMetrics) StateError() { m.stateErrors.Inc() }

// StateRetry implements rlqs.Observer.
func (m *quotaMetrics) StateRetry() { m.stateRetries.Inc() }

// Uncovered implements rlqs.Observer.
func (m *quotaMetrics) Uncovered(domain string) { m.uncovered.WithLabelValues(domain).Inc() }

// quotaCollector exports the RLQS gauges, read from the service at scrape time: the open
// streams, and per quota rule (domain, rule: the rule's name) its limit, the bucket ids
// reported, the shares assigned and the demand reported by this replica's open streams.
type quotaCollector struct{ s *Server }

var (
	quotaStreamsDesc = prometheus.NewDesc("sluice_rlqs_streams",
		"RLQS streams open on this replica.", nil, nil)
	quotaLimitDesc = prometheus.NewDesc("sluice_rlqs_limit_rate",
		"Limit of a quota rule, requests per second, for each of its bucket ids.", []string{"domain", "rule"}, nil)
	quotaBucketsDesc = prometheus.NewDesc("sluice_rlqs_buckets",
		"Distinct bucket ids of a quota rule reported by this replica's open streams.", []string{"domain", "rule"}, nil)
	quotaAssignedDesc = prometheus.NewDesc("sluice_rlqs_assigned_rate",
		"Sum of the unexpired shares of a quota rule assigned to this replica's open streams, requests per second, over its bucket ids.", []string{"domain", "rule"}, nil)
	quotaDemandDesc = prometheus.NewDesc("sluice_rlqs_demand_rate",
		"Sum of the request rates (allowed + denied) this replica's open streams last reported for a quota rule's bucket ids.", []string{"domain", "rule"}, nil)
)

func (c quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{quotaStreamsDesc, quotaLimitDesc, quotaBucketsDesc, quotaAssignedDesc, quotaDemandDesc} {
		ch <- d
	}
}

func (c quotaCollector) Collect(ch chan<- prometheus.Metric) {
	q := c.s.quota
	if q == nil {
		return // gRPC disabled
	}
	ch <- prometheus.MustNewConstMetric(quotaStreamsDesc, prometheus.GaugeValue, float64(q.Streams()))
	for _, r := range q.Stats() {
		if r.Limit > 0 {
			ch <- prometheus.MustNewConstMetric(quotaLimitDesc, prometheus.GaugeValue, r.Limit, r.Domain, r.Rule)
		}
		ch <- prometheus.MustNewConstMetric(quotaBucketsDesc, prometheus.GaugeValue, float64(r.Buckets), r.Domain, r.Rule)
		ch <- prometheus.MustNewConstMetric(quotaAssignedDesc, prometheus.GaugeValue, r.Assigned, r.Domain, r.Rule)
		ch <- prometheus.MustNewConstMetric(quotaDemandDesc, prometheus.GaugeValue, r.Demand, r.Domain, r.Rule)
	}
}
