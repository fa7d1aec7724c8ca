package rlsmetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
)

// metricTopKeys is the number of keys per limit in sluice_top_key_rate: bounded cardinality.
const metricTopKeys = 10

// topCollector exports the metricTopKeys keys of highest rate of each limit as gauges:
// sluice_top_key_rate{domain, limit, rank, key, result}, read from the engine's live view at
// scrape time. The cardinality at any time is bounded by the limits decided x metricTopKeys
// x 2.
type topCollector struct{ e *rls.Engine }

var topKeyDesc = prometheus.NewDesc("sluice_top_key_rate",
	"Requests per second of the keys of highest rate of each limit (over the last 10 s, or the hot parameter's period), by result (admitted, denied); rank 1 is the highest.",
	[]string{"domain", "limit", "rank", "key", "result"}, nil)

func (c topCollector) Describe(ch chan<- *prometheus.Desc) { ch <- topKeyDesc }

func (c topCollector) Collect(ch chan<- prometheus.Metric) {
	c.e.EachTop(metricTopKeys, func(l *config.Limit, keys []rls.TopKey) {
		for i, k := range keys {
			rank := strconv.Itoa(i + 1)
			ch <- prometheus.MustNewConstMetric(topKeyDesc, prometheus.GaugeValue, k.AdmittedRate, l.Domain, l.FullKey, rank, k.Key, "admitted")
			ch <- prometheus.MustNewConstMetric(topKeyDesc, prometheus.GaugeValue, k.DeniedRate, l.Domain, l.FullKey, rank, k.Key, "denied")
		}
	})
}
