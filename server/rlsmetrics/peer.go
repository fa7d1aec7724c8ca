package rlsmetrics

import (
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/rls"
)

// peerMetrics are envoyproxy/ratelimit's Prometheus series, with the names and labels its
// default statsd mapping gives them (src/stats/prom/default_mapper.yaml), so that dashboards
// and alerts written for it keep working. The descriptor series are labelled domain, key1
// and key2: the first three dot-separated parts of the peer's stats key
// ("domain.key_value.subkey"); key2 is "" for a one-level key (PromQL reads a missing label
// as ""). The labels come from the rules, so cardinality is bounded, except for limits with
// detailed_metric or value_to_metric, whose keys carry the request's values as in the peer.
type peerMetrics struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode *prometheus.CounterVec
	configLoadSuccess, configLoadError                       peerCounter
	redisError, serviceError                                 peerCounter
	grpcRequests                                             prometheus.Counter
	grpcTime                                                 prometheus.Observer
	grpcTimeMS                                               bool // grpcTime in whole milliseconds (PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS)
	globalShadow                                             peerCounter
	unknownDomains                                           prometheus.Counter
	stats                                                    PeerStats // told the same counts; nil: none
}

// PeerStats are told envoyproxy/ratelimit's counts as they are added to its series
// (Options.Peer): package server keeps them as the peer's statsd stats. Their methods are
// called on the decision path: they must be cheap and safe for concurrent use.
type PeerStats interface {
	// Key returns the counts of one stats key ("domain.key_value.subkey", as the peer
	// writes it: PeerLabels' sanitizing is the receiver's to apply), created at its first
	// count.
	Key(key string) PeerKey
	// ConfigLoad counts a rules load: config_load_success, or config_load_error.
	ConfigLoad(ok bool)
	// RedisError and ServiceError count a failed ShouldRateLimit call: the store failed, or
	// the request was refused as invalid.
	RedisError()
	ServiceError()
	// GlobalShadow counts a request over its limit answered OK by the global shadow mode.
	GlobalShadow()
	// ShouldRateLimit counts one RLS call of a gRPC transport and its time.
	ShouldRateLimit(took time.Duration)
}

// PeerKey receives the counts of one stats key.
type PeerKey interface {
	Add(n PeerCounts)
}

// peerCounters are the counters of one stats key.
type peerCounters struct {
	total, over, near, within, shadow prometheus.Counter
	stat                              PeerKey // nil without PeerStats
}

// PeerCounts are the amounts a decision adds to the counters of one stats key, as the peer
// counts them (PeerCountsOf).
type PeerCounts struct {
	Total, Over, Near, Within, Shadow int64
}

func (c peerCounters) add(n PeerCounts) {
	c.total.Add(float64(n.Total))
	if n.Over > 0 {
		c.over.Add(float64(n.Over))
	}
	if n.Near > 0 {
		c.near.Add(float64(n.Near))
	}
	if n.Within > 0 {
		c.within.Add(float64(n.Within))
	}
	if n.Shadow > 0 {
		c.shadow.Add(float64(n.Shadow))
	}
	if c.stat != nil {
		c.stat.Add(n)
	}
}

// peerCounter is one of the peer's counters: its Prometheus series and, with PeerStats, its
// count there.
type peerCounter struct {
	prom prometheus.Counter
	stat func() // nil without PeerStats
}

// Inc adds one to both.
func (c peerCounter) Inc() {
	c.prom.Inc()
	if c.stat != nil {
		c.stat()
	}
}

func newPeerMetrics(reg prometheus.Registerer, stats PeerStats, timeMS bool) (*peerMetrics, error) {
	labels := []string{"domain", "key1", "key2"}
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &peerMetrics{
		totalHits:   vec("ratelimit_service_rate_limit_total_hits", "envoyproxy/ratelimit: hits (units) asked of the descriptor's limit."),
		overLimit:   vec("ratelimit_service_rate_limit_over_limit", "envoyproxy/ratelimit: hits over the descriptor's limit."),
		nearLimit:   vec("ratelimit_service_rate_limit_near_limit", "envoyproxy/ratelimit: hits past NEAR_LIMIT_RATIO of the descriptor's limit."),
		withinLimit: vec("ratelimit_service_rate_limit_within_limit", "envoyproxy/ratelimit: hits within the descriptor's limit."),
		shadowMode:  vec("ratelimit_service_rate_limit_shadow_mode", "envoyproxy/ratelimit: hits over a shadow_mode limit, answered OK."),
	}
	load := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_config_load_success",
		Help: "envoyproxy/ratelimit: rules loads that succeeded."}, nil)
	loadErr := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_config_load_error",
		Help: "envoyproxy/ratelimit: rules loads that failed (the previous rules stay)."}, nil)
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_should_rate_limit_error",
		Help: "envoyproxy/ratelimit: ShouldRateLimit calls that failed, by err_type: redis_error (store unavailable) or service_error (bad request)."},
		[]string{"err_type"})
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_total_requests",
		Help: "envoyproxy/ratelimit: gRPC requests by method."}, []string{"grpc_method"})
	times := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ratelimit_service_response_time_seconds",
		Help: "envoyproxy/ratelimit: gRPC response time by method.", Buckets: prometheus.DefBuckets}, []string{"grpc_method"})
	shadow := prometheus.NewCounter(prometheus.CounterOpts{Name: "ratelimit_service_global_shadow_mode",
		Help: "envoyproxy/ratelimit: requests over the limit answered OK by the global SHADOW_MODE."})
	unknown := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_unknown_domain_requests_total",
		Help: "RLS requests naming a domain that no rules define, answered OK with no limit (each domain is logged once)."})
	for _, c := range []prometheus.Collector{m.totalHits, m.overLimit, m.nearLimit, m.withinLimit, m.shadowMode,
		load, loadErr, errs, reqs, times, shadow, unknown} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.stats, m.grpcTimeMS = stats, timeMS
	m.configLoadSuccess, m.configLoadError = peerCounter{prom: load.WithLabelValues()}, peerCounter{prom: loadErr.WithLabelValues()}
	m.redisError = peerCounter{prom: errs.WithLabelValues("redis_error")}
	m.serviceError = peerCounter{prom: errs.WithLabelValues("service_error")}
	m.grpcRequests, m.grpcTime = reqs.WithLabelValues("ShouldRateLimit"), times.WithLabelValues("ShouldRateLimit")
	m.globalShadow, m.unknownDomains = peerCounter{prom: shadow}, unknown
	if stats != nil {
		m.configLoadSuccess.stat, m.configLoadError.stat = func() { stats.ConfigLoad(true) }, func() { stats.ConfigLoad(false) }
		m.redisError.stat, m.serviceError.stat = stats.RedisError, stats.ServiceError
		m.globalShadow.stat = stats.GlobalShadow
	}
	return m, nil
}

// ipv4 finds the IPv4 addresses whose dots the peer's stats names replace.
var ipv4 = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

// peerLabels are the domain, key1 and key2 labels of a peer stats key: the key sanitized as
// the peer sanitizes stat names (':' and '|' to '_', the dots of IPv4 addresses to '_'),
// then split at its dots as the peer's statsd mapping does.
func peerLabels(key string) (domain, key1, key2 string) {
	domain, rest, _ := strings.Cut(SanitizeStatName(key), ".")
	key1, rest, _ = strings.Cut(rest, ".")
	key2, _, _ = strings.Cut(rest, ".")
	return domain, key1, key2
}

// SanitizeStatName sanitizes a stats key as the peer sanitizes stat names: ':' and '|' to
// '_', the dots of IPv4 addresses to '_'.
func SanitizeStatName(key string) string {
	key = strings.NewReplacer(":", "_", "|", "_").Replace(key)
	return ipv4.ReplaceAllStringFunc(key, func(ip string) string { return strings.ReplaceAll(ip, ".", "_") })
}

// counters returns the counters of a peer stats key ("domain.key_value.subkey").
func (m *peerMetrics) counters(key string) peerCounters {
	d, k1, k2 := peerLabels(key)
	return peerCounters{
		total:  m.totalHits.WithLabelValues(d, k1, k2),
		over:   m.overLimit.WithLabelValues(d, k1, k2),
		near:   m.nearLimit.WithLabelValues(d, k1, k2),
		within: m.withinLimit.WithLabelValues(d, k1, k2),
		shadow: m.shadowMode.WithLabelValues(d, k1, k2),
		stat:   m.statKey(key),
	}
}

// statKey is the PeerStats' counts of a stats key; nil without PeerStats.
func (m *peerMetrics) statKey(key string) PeerKey {
	if m.stats == nil {
		return nil
	}
	return m.stats.Key(key)
}

// PeerCountsOf is what a decision adds to the peer's counters of its stats key: the hits in
// total_hits, and then, from the counts before and after the hits, how many were over the
// limit, past the near-limit threshold (floor(limit x ratio)) or within it; hits over a
// shadow_mode limit also count in shadow_mode. The counts are the binding rule's: limit -
// remaining after the hits when admitted, before them when denied (Sluice does not count
// denied hits). A peek or a refund counts nothing.
func PeerCountsOf(o *rls.Outcome, ratio float64) PeerCounts {
	hits := o.Hits
	if hits <= 0 || o.Refund {
		return PeerCounts{}
	}
	n := PeerCounts{Total: hits}
	limit := int64(0)
	if !o.Block {
		limit = o.Decision.Capacity
	}
	var before, after int64
	if o.Over {
		before = max(0, limit-o.Decision.Remaining)
		after = before + hits
	} else {
		after = max(0, limit-o.Decision.Remaining)
		before = max(0, after-hits)
	}
	near := int64(math.Floor(float64(limit) * ratio))
	if after > limit {
		n.Over = after - limit
		if before >= limit {
			n.Over = hits
		} else {
			n.Near = limit - max(near, before)
		}
		if o.Shadow {
			n.Shadow = n.Over
		}
		return n
	}
	if after > near {
		if before >= near {
			n.Near = hits
		} else {
			n.Near = after - near
		}
	}
	n.Within = hits
	return n
}

// ObserveShouldRateLimit counts one RLS ShouldRateLimit call of a gRPC transport in
// envoyproxy/ratelimit's series: its time in ratelimit_service_response_time_seconds (in
// milliseconds with Options.ResponseTimeMilliseconds, as the peer's name says not) and
// ratelimit_service_total_requests and, when invalid, a service_error in
// ratelimit_service_should_rate_limit_error (next to the store's redis_error).
func (m *Metrics) ObserveShouldRateLimit(took time.Duration, invalid bool) {
	p := m.peer
	p.grpcRequests.Inc()
	if p.grpcTimeMS {
		p.grpcTime.Observe(float64(took.Milliseconds())) // the peer's timer: whole milliseconds, unscaled
	} else {
		p.grpcTime.Observe(took.Seconds())
	}
	if invalid {
		p.serviceError.Inc()
	}
	if p.stats != nil {
		p.stats.ShouldRateLimit(took)
	}
}
