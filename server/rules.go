package server

import (
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/hotkey"
)

// rules is one loaded config with everything the hot path needs precomputed: metric
// handles and the RLS current_limit messages of every limit. It is immutable.
type rules struct {
	cfg     *config.Config
	limits  []limitInfo // by config.Limit.Index
	domains map[string]*domainCounters
	named   map[string]*config.Limit // see namedLimits
}

type limitInfo struct {
	counters limitCounters
	peer     peerCounters // envoyproxy/ratelimit's series of the limit's FullKey
	// current are the RLS current_limit of each rule of the limit; shared read-only by
	// responses.
	current []*rlsv3.RateLimitResponse_RateLimit
	// hot is the sketch of a hot parameter (hot.go); nil for other limits.
	hot *hotkey.Param
	// view tracks the keys of highest rate for the live view (view.go).
	view *hotkey.Tracker
}

func (s *Server) compileRules(cfg *config.Config) *rules {
	r := &rules{cfg: cfg, limits: make([]limitInfo, len(cfg.Limits())), domains: make(map[string]*domainCounters),
		named: namedLimits(cfg)}
	for _, l := range cfg.Limits() {
		info := limitInfo{counters: s.metrics.limitCounters(l), peer: s.peer.counters(l.FullKey), hot: s.hotParam(l)}
		info.view = s.viewTracker(l, info.hot)
		rules := l.Rules
		if l.Block {
			rules = []sluice.Rule{{Period: l.Unit.Duration() * time.Duration(max(l.UnitMultiplier, 1))}}
		}
		for _, rule := range rules {
			unit, mult := config.UnitOf(rule.Period)
			rl := &rlsv3.RateLimitResponse_RateLimit{
				RequestsPerUnit: clampU32(rule.Limit),
				Unit:            rlsv3.RateLimitResponse_RateLimit_Unit(unit),
			}
			if l.Name != l.FullKey {
				rl.Name = l.Name
			}
			if mult > 1 {
				rl.UnitMultiplier = wrapperspb.UInt32(mult)
			}
			info.current = append(info.current, rl)
		}
		r.limits[l.Index] = info
	}
	for _, d := range cfg.Domains() {
		r.domains[d] = s.metrics.domainCounters(d)
		r.domains[d].peerOverride = s.peer.counters(d + ".override")
	}
	return r
}

// setRules makes cfg current.
func (s *Server) setRules(cfg *config.Config) {
	s.rules.Store(s.compileRules(cfg))
	s.peer.configLoadSuccess.Inc()
	s.metrics.reloadTime.Set(float64(time.Now().UnixNano()) / 1e9)
	s.metrics.rulesLoaded.Set(float64(len(cfg.Limits())))
}

func clampU32(v int64) uint32 {
	switch {
	case v < 0:
		return 0
	case v > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(v)
}
