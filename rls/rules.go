package rls

import (
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/hotkey"
)

// rules is one loaded config with everything the hot path needs precomputed: the metric
// handles and sketches of every limit. It is immutable.
type rules struct {
	cfg     *config.Config
	limits  []limitInfo // by config.Limit.Index
	domains map[string]*domainCounters
	named   map[string]*config.Limit // see namedLimits
	// pending: no rules yet from the RulesSource (source.go); every decision is an error.
	pending bool
}

type limitInfo struct {
	counters limitCounters
	peer     peerCounters // envoyproxy/ratelimit's series of the limit's FullKey
	// hot is the sketch of a hot parameter (hot.go); nil for other limits.
	hot *hotkey.Param
	// view tracks the keys of highest rate for the live view (view.go).
	view *hotkey.Tracker
}

func (e *Engine) compileRules(cfg *config.Config) *rules {
	r := &rules{cfg: cfg, limits: make([]limitInfo, len(cfg.Limits())), domains: make(map[string]*domainCounters),
		named: namedLimits(cfg)}
	for _, l := range cfg.Limits() {
		info := limitInfo{counters: e.metrics.limitCounters(l), peer: e.peer.counters(l.FullKey), hot: e.hotParam(l)}
		info.view = e.viewTracker(l, info.hot)
		r.limits[l.Index] = info
	}
	for _, d := range cfg.Domains() {
		r.domains[d] = e.metrics.domainCounters(d)
		r.domains[d].peerOverride = e.peer.counters(d + ".override")
	}
	return r
}

// setRules makes cfg current.
func (e *Engine) setRules(cfg *config.Config) {
	e.rules.Store(e.compileRules(cfg))
	e.rulesOnce.Do(func() { close(e.rulesIn) })
	e.peer.configLoadSuccess.Inc()
	e.metrics.reloadTime.Set(float64(time.Now().UnixNano()) / 1e9)
	e.metrics.rulesLoaded.Set(float64(len(cfg.Limits())))
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
