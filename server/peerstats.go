package server

import (
	"time"

	gostats "github.com/lyft/gostats"

	"github.com/sluicehq/sluice/server/rlsmetrics"
)

// peerStats are envoyproxy/ratelimit's statsd stats, under the names its stats manager
// (src/stats/manager_impl.go) and gRPC server reporter (src/metrics) give them:
//
//	ratelimit.service.rate_limit.<stats key>.{total_hits,over_limit,near_limit,within_limit,shadow_mode}
//	ratelimit.service.{config_load_success,config_load_error,global_shadow_mode}
//	ratelimit.service.call.should_rate_limit.{redis_error,service_error}
//	ratelimit_server.ShouldRateLimit.{total_requests,response_time}
//
// They are counted next to the Prometheus series of package rlsmetrics (the
// rlsmetrics.PeerStats they are), in a gostats store that Config.PeerStats names; its sinks
// (statsd, the statsd_exporter mapping) send them. The stats keys are sanitized as the peer
// sanitizes them (rlsmetrics.SanitizeStatName). Config.PeerStatsTags are added to every
// stat, as the peer adds EXTRA_TAGS. The counters of a stats key are created at its first
// count.
type peerStats struct {
	rateLimit                          gostats.Scope
	configLoadSuccess, configLoadError gostats.Counter
	redisError, serviceError           gostats.Counter
	globalShadow                       gostats.Counter
	totalRequests                      gostats.Counter
	responseTime                       gostats.Timer
}

var _ rlsmetrics.PeerStats = (*peerStats)(nil)

// peerStatCounters are the statsd counters of one stats key.
type peerStatCounters struct {
	total, over, near, within, shadow gostats.Counter
}

// newPeerStats creates the peer's stats in store; nil without a store.
func newPeerStats(store gostats.Store, tags map[string]string) *peerStats {
	if store == nil {
		return nil
	}
	service := store.ScopeWithTags("ratelimit", tags).Scope("service")
	call := service.Scope("call").Scope("should_rate_limit")
	server := store.ScopeWithTags("ratelimit_server", tags).Scope("ShouldRateLimit")
	return &peerStats{
		rateLimit:         service.Scope("rate_limit"),
		configLoadSuccess: service.NewCounter("config_load_success"),
		configLoadError:   service.NewCounter("config_load_error"),
		globalShadow:      service.NewCounter("global_shadow_mode"),
		redisError:        call.NewCounter("redis_error"),
		serviceError:      call.NewCounter("service_error"),
		totalRequests:     server.NewCounter("total_requests"),
		responseTime:      server.NewTimer("response_time"),
	}
}

// Key implements rlsmetrics.PeerStats: the statsd counters of a peer stats key.
func (s *peerStats) Key(key string) rlsmetrics.PeerKey {
	key = rlsmetrics.SanitizeStatName(key)
	return &peerStatCounters{
		total:  s.rateLimit.NewCounter(key + ".total_hits"),
		over:   s.rateLimit.NewCounter(key + ".over_limit"),
		near:   s.rateLimit.NewCounter(key + ".near_limit"),
		within: s.rateLimit.NewCounter(key + ".within_limit"),
		shadow: s.rateLimit.NewCounter(key + ".shadow_mode"),
	}
}

// Add implements rlsmetrics.PeerKey: a decision's counts.
func (c *peerStatCounters) Add(n rlsmetrics.PeerCounts) {
	c.total.Add(uint64(n.Total))
	c.over.Add(uint64(n.Over))
	c.near.Add(uint64(n.Near))
	c.within.Add(uint64(n.Within))
	c.shadow.Add(uint64(n.Shadow))
}

// ConfigLoad implements rlsmetrics.PeerStats.
func (s *peerStats) ConfigLoad(ok bool) {
	if ok {
		s.configLoadSuccess.Inc()
	} else {
		s.configLoadError.Inc()
	}
}

// RedisError implements rlsmetrics.PeerStats.
func (s *peerStats) RedisError() { s.redisError.Inc() }

// ServiceError implements rlsmetrics.PeerStats.
func (s *peerStats) ServiceError() { s.serviceError.Inc() }

// GlobalShadow implements rlsmetrics.PeerStats.
func (s *peerStats) GlobalShadow() { s.globalShadow.Inc() }

// ShouldRateLimit implements rlsmetrics.PeerStats: one ShouldRateLimit call, its time in
// whole milliseconds, as the peer's gRPC reporter counts it.
func (s *peerStats) ShouldRateLimit(took time.Duration) {
	s.totalRequests.Inc()
	s.responseTime.AddValue(float64(took.Milliseconds()))
}
