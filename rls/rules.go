package rls

import (
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/hotkey"
)

// rules is one loaded config with what the decisions of its limits need: the runtime state
// of every limit (its sketches, its adaptive in-flight limit, its observer), the rules being
// plain data. It is built off to the side of the decisions (compileRules) and swapped in
// atomically; it is immutable but for the state its limits create on first use.
type rules struct {
	cfg     *config.Config
	limits  []limitInfo // by config.Limit.Index
	domains map[string]*domainInfo
	// named indexes the limits by the names a request may use (namedLimits), built at the
	// first request that names one.
	named     map[string]*config.Limit
	namedOnce sync.Once
	// pending: no rules yet from the RulesSource (source.go); every decision is an error.
	pending bool
}

// limitInfo is one limit's runtime state. The state outlives the rules set: a reload that
// keeps the limit unchanged carries it over (inherit), so what a limit learned, its sketches
// and its adaptive limit, survives the reload.
type limitInfo struct {
	rt *limitRuntime
	// hot is the sketch of a hot parameter (hot.go); nil for other limits.
	hot *hotkey.Param
	// adaptive is the in-flight limit of a max_in_flight with adaptive settings; nil
	// otherwise.
	adaptive *adaptive.Gradient
}

// limitRuntime is what a limit creates on its first decision: the observer of its decisions
// and the live view's sketch of its keys (view.go), so that a rule set of many limits costs
// neither until they are used.
type limitRuntime struct {
	obs  atomic.Pointer[limitObs]
	view atomic.Pointer[hotkey.Tracker]
}

type limitObs struct{ LimitObserver }

// domainInfo is a domain's observer, created at its first request that needs it.
type domainInfo struct {
	obs atomic.Pointer[domainObs]
}

type domainObs struct{ DomainObserver }

// limitID names a limit across rules sets: its domain and descriptor path.
type limitID struct{ domain, fullKey string }

// compileRules builds the rules set of cfg, carrying over the state of every limit of the
// rules in force that cfg keeps (same domain and path; see inherit): one map lookup per
// limit, so a reload takes time linear in the rules.
func (e *Engine) compileRules(cfg *config.Config) *rules {
	r := &rules{cfg: cfg, limits: make([]limitInfo, len(cfg.Limits())), domains: make(map[string]*domainInfo)}
	old := e.rules.Load()
	prev := old.byID()
	for _, l := range cfg.Limits() {
		var was *config.Limit
		var wasInfo *limitInfo
		if i, ok := prev[limitID{l.Domain, l.FullKey}]; ok && i >= 0 {
			was, wasInfo = old.cfg.Limits()[i], &old.limits[i]
		}
		r.limits[l.Index] = e.inherit(l, was, wasInfo)
	}
	for _, d := range cfg.Domains() {
		r.domains[d] = &domainInfo{}
	}
	return r
}

// byID indexes the limits of st by limitID: -1 for an ID that two limits share (their full
// keys collide), which then carries nothing over. Nil for no rules.
func (st *rules) byID() map[limitID]int {
	if st == nil || len(st.limits) == 0 {
		return nil
	}
	m := make(map[limitID]int, len(st.limits))
	for _, l := range st.cfg.Limits() {
		id := limitID{l.Domain, l.FullKey}
		if _, dup := m[id]; dup {
			m[id] = -1
			continue
		}
		m[id] = l.Index
	}
	return m
}

// inherit returns the state of limit l: the state of was, the limit of the rules in force
// with l's domain and path (nil: none), for what l keeps unchanged, else new state. The
// sketches (the live view's, a hot parameter's) carry over when the rules and the hot
// parameter are the same; the adaptive in-flight limit when its settings are.
func (e *Engine) inherit(l, was *config.Limit, info *limitInfo) limitInfo {
	var st limitInfo
	if was != nil && sameRules(was, l) {
		st.rt, st.hot = info.rt, info.hot
	}
	if st.rt == nil {
		st.rt = &limitRuntime{}
	}
	if l.Hot != nil && st.hot == nil {
		st.hot, _ = hotkey.New(l.Rules[0], l.Hot.Config()) // validated by config
	}
	if a := adaptiveSettings(l); a != nil {
		if was != nil && info.adaptive != nil && sameAdaptive(was, l) {
			st.adaptive = info.adaptive
		} else {
			st.adaptive, _ = adaptive.NewGradient(*a) // validated by config
		}
	}
	return st
}

// sameRules reports whether limits a and b decide alike: the same rules, scopes and hot
// parameter.
func sameRules(a, b *config.Limit) bool {
	if len(a.Rules) != len(b.Rules) || (a.Hot == nil) != (b.Hot == nil) || (a.Hot != nil && *a.Hot != *b.Hot) {
		return false
	}
	for i := range a.Rules {
		if a.Rules[i] != b.Rules[i] || a.IsLocal(i) != b.IsLocal(i) || a.IsGlobal(i) != b.IsGlobal(i) {
			return false
		}
	}
	return true
}

func adaptiveSettings(l *config.Limit) *adaptive.Settings {
	if l.InFlight == nil {
		return nil
	}
	return l.InFlight.Adaptive
}

func sameAdaptive(a, b *config.Limit) bool {
	x, y := adaptiveSettings(a), adaptiveSettings(b)
	return x != nil && y != nil && *x == *y
}

// limitObserver returns the observer of the limit at index i, asking the engine's Observer
// for it at the limit's first decision.
func (e *Engine) limitObserver(st *rules, l *config.Limit) LimitObserver {
	rt := st.limits[l.Index].rt
	if o := rt.obs.Load(); o != nil {
		return o.LimitObserver
	}
	rt.obs.CompareAndSwap(nil, &limitObs{e.obs.Limit(l)})
	return rt.obs.Load().LimitObserver
}

// domainObserver returns the observer of domain d of st (nil when st does not define it).
func (e *Engine) domainObserver(st *rules, d string) DomainObserver {
	di := st.domains[d]
	if di == nil {
		return nil
	}
	if o := di.obs.Load(); o != nil {
		return o.DomainObserver
	}
	di.obs.CompareAndSwap(nil, &domainObs{e.obs.Domain(d)})
	return di.obs.Load().DomainObserver
}

// setRules makes cfg current: its rules set is built off to the side of the decisions, which
// go on under the rules in force meanwhile, then swapped in.
func (e *Engine) setRules(cfg *config.Config, initial bool) {
	r := e.compileRules(cfg)
	if e.built != nil {
		e.built() // tests: the rules set is built, not yet in force
	}
	e.rules.Store(r)
	e.rulesOnce.Do(func() { close(e.rulesIn) })
	e.obs.RulesApplied(cfg, initial)
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
