package rls

import (
	"time"

	gostats "github.com/lyft/gostats"
)

// peerStats are envoyproxy/ratelimit's statsd stats, under the names its stats manager
// (src/stats/manager_impl.go) and gRPC server reporter (src/metrics) give them:
//
//	ratelimit.service.rate_limit.<stats key>.{total_hits,over_limit,near_limit,within_limit,shadow_mode}
//	ratelimit.service.{config_load_success,config_load_error,global_shadow_mode}
//	ratelimit.service.call.should_rate_limit.{redis_error,service_error}
//	ratelimit_server.ShouldRateLimit.{total_requests,response_time}
//
// They are counted next to the Prometheus series of peerMetrics, in a gostats store that
// Config.PeerStats names; its sinks (statsd, the statsd_exporter mapping) send them. The
// stats keys are sanitized as the peer sanitizes them (peerLabels' replacements). Config.
// PeerStatsTags are added to every stat, as the peer adds EXTRA_TAGS.
type peerStats struct {
	rateLimit                          gostats.Scope
	configLoadSuccess, configLoadError gostats.Counter
	redisError, serviceError           gostats.Counter
	globalShadow                       gostats.Counter
	totalRequests                      gostats.Counter
	responseTime                       gostats.Timer
}

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

// counters returns the statsd counters of a peer stats key; nil without stats.
func (s *peerStats) counters(key string) *peerStatCounters {
	if s == nil {
		return nil
	}
	key = sanitizeStatName(key)
	return &peerStatCounters{
		total:  s.rateLimit.NewCounter(key + ".total_hits"),
		over:   s.rateLimit.NewCounter(key + ".over_limit"),
		near:   s.rateLimit.NewCounter(key + ".near_limit"),
		within: s.rateLimit.NewCounter(key + ".within_limit"),
		shadow: s.rateLimit.NewCounter(key + ".shadow_mode"),
	}
}

// add counts an item's hits in the statsd counters (nil: none).
func (c *peerStatCounters) add(n peerCounts) {
	if c == nil {
		return
	}
	c.total.Add(uint64(n.total))
	c.over.Add(uint64(n.over))
	c.near.Add(uint64(n.near))
	c.within.Add(uint64(n.within))
	c.shadow.Add(uint64(n.shadow))
}

// observe counts one ShouldRateLimit call: its time in whole milliseconds, as the peer's
// gRPC reporter does.
func (s *peerStats) observe(took time.Duration) {
	if s == nil {
		return
	}
	s.totalRequests.Inc()
	s.responseTime.AddValue(float64(took.Milliseconds()))
}
