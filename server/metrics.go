package server

import "github.com/prometheus/client_golang/prometheus"

// metrics are the transports' Prometheus collectors, on the engine's registry next to its
// own (decisions, store errors, reloads: package rls).
type metrics struct {
	grpcLatency, httpLatency prometheus.Observer
	grpcInvalid, httpInvalid prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	invalid := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_invalid_requests_total",
		Help: "Requests rejected as malformed (INVALID_ARGUMENT / HTTP 400) by transport."}, []string{"transport"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_request_duration_seconds",
		Help:    "Time to answer a rate-limit request, by transport.",
		Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}},
		[]string{"transport"})
	for _, c := range []prometheus.Collector{invalid, latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return &metrics{grpcLatency: latency.WithLabelValues("grpc"), httpLatency: latency.WithLabelValues("http"),
		grpcInvalid: invalid.WithLabelValues("grpc"), httpInvalid: invalid.WithLabelValues("http")}, nil
}
