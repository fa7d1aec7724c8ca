package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/gate"
)

// metrics are the proxy's own collectors, next to the server's (decisions per limit, store
// errors, reloads) on the same registry.
type metrics struct {
	forwarded, denied, invalid, unavailable prometheus.Counter
	upstreamErrors                          prometheus.Counter
	releaseFailures                         prometheus.Counter
	budgetCut                               prometheus.Counter
	upstreamTimeouts                        [2]prometheus.Counter // by timeoutResponseHeader, timeoutIdle
	clientErrors                            [2]prometheus.Counter // by clientBodyTimeout, clientBodyMalformed
	connsRefused                            prometheus.Counter
	decision                                prometheus.Observer
}

// The phases of sluice_proxy_upstream_timeouts_total.
const (
	timeoutResponseHeader = iota
	timeoutIdle
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_proxy_requests_total",
		Help: "Requests by result: forwarded to the upstream, denied (429), invalid (400: a descriptor built from the request was refused), unavailable (503: the store failed without a fallback, or the request was cancelled before its decision)."},
		[]string{"result"})
	upstream := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_proxy_upstream_errors_total",
		Help: "Forwarded requests the upstream did not answer (502), not counting requests the client cancelled."})
	timeouts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_proxy_upstream_timeouts_total",
		Help: "Forwarded requests the upstream left waiting, by phase: response_header (no response headers within the response-header timeout, or no connection in time: answered 504), idle (a response body silent for the idle timeout: the response was aborted)."},
		[]string{"phase"})
	decision := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_proxy_decision_duration_seconds",
		Help:    "Time to decide a request before forwarding it (building descriptors and the store call).",
		Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}})
	client := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_proxy_client_errors_total",
		Help: "Forwarded requests whose body the client broke or stopped sending, by reason: body_timeout (silent for the request-body timeout: answered 408), body_malformed (a malformed chunked encoding, a body shorter than its length: answered 400)."},
		[]string{"reason"})
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_proxy_connections_refused_total",
		Help: "Client connections closed at once for being over the connection bound (--max-conns)."})
	releases := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_proxy_lease_release_failures_total",
		Help: "Releases of in-flight slots (max_in_flight) the store could not take, at a request's end or after an acquire that failed (timed out): each slot stays held until its lease expires."})
	cuts := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_proxy_budget_cuts_total",
		Help: "Streamed responses cut within one event because a budget of the proxy section was spent (the provider's error event sent in place of the rest)."})
	for _, c := range []prometheus.Collector{requests, upstream, timeouts, client, refused, decision, releases, cuts} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return &metrics{forwarded: requests.WithLabelValues("forwarded"), denied: requests.WithLabelValues("denied"),
		invalid: requests.WithLabelValues("invalid"), unavailable: requests.WithLabelValues("unavailable"),
		upstreamErrors: upstream, decision: decision, connsRefused: refused, releaseFailures: releases, budgetCut: cuts,
		clientErrors:     [2]prometheus.Counter{clientBodyTimeout: client.WithLabelValues("body_timeout"), clientBodyMalformed: client.WithLabelValues("body_malformed")},
		upstreamTimeouts: [2]prometheus.Counter{timeoutResponseHeader: timeouts.WithLabelValues("response_header"), timeoutIdle: timeouts.WithLabelValues("idle")}}, nil
}

// count counts a request that did not pass.
func (m *metrics) count(o gate.Outcome) {
	switch o {
	case gate.Denied, gate.Refused:
		m.denied.Inc()
	case gate.Invalid:
		m.invalid.Inc()
	default:
		m.unavailable.Inc()
	}
}
