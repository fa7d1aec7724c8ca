package rls

import (
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/store"
)

// The live view (GET /v1/top, /ui and the sluice_top_key_rate gauges) tracks, per limit, the
// keys of highest rate over the last viewPeriod in a Space-Saving sketch of ViewTopK keys:
// bounded memory whatever the number of keys. A hot parameter's own sketch serves instead.
const (
	ViewTopK   = 64
	viewPeriod = 10 * time.Second
)

// tracker returns the sketch of the keys of limit info for the live view: its hot
// parameter's, or its own, created at its first decision.
func (e *Engine) tracker(info *limitInfo) *hotkey.Tracker {
	if info.hot != nil {
		return info.hot.Tracker()
	}
	if t := info.rt.view.Load(); t != nil {
		return t
	}
	info.rt.view.CompareAndSwap(nil, hotkey.NewTracker(ViewTopK, viewPeriod, e.clock))
	return info.rt.view.Load()
}

// viewOf returns the sketch of limit info if it has one yet (nil before its first decision).
func viewOf(info *limitInfo) *hotkey.Tracker {
	if info.hot != nil {
		return info.hot.Tracker()
	}
	return info.rt.view.Load()
}

// TopResponse is the live view: the answer of GET /v1/top.
type TopResponse struct {
	// Store says which store decides and the fallback's state.
	Store StoreView `json:"store"`
	// Domains are the rules loaded, by domain.
	Domains []TopDomain `json:"domains"`
}

// StoreView is the store and its fallback.
type StoreView struct {
	// URL names the store (without its password); "custom" for a Store passed in Config.
	URL string `json:"url"`
	// Mode is the distribution mode.
	Mode string `json:"mode"`
	// Fallback is the fallback policy ("" without), Circuit "store" or "fallback" (the
	// distributed.Circuit; "state" on the wire), and Degraded why decisions are the
	// fallback's ("" while the store decides).
	Fallback string `json:"fallback,omitempty"`
	Circuit  string `json:"state"`
	Degraded string `json:"degraded,omitempty"`
}

// TopDomain is one domain's limits.
type TopDomain struct {
	Domain string     `json:"domain"`
	Limits []TopLimit `json:"limits"`
}

// TopLimit is one limit (a descriptor's rules) and its top keys.
type TopLimit struct {
	// Name and FullKey name the limit (as in the metrics); Rules describe its rules.
	Name    string   `json:"name"`
	FullKey string   `json:"full_key"`
	Rules   []string `json:"rules"`
	// DecisionsPerSecond over the last period of the tracker (10 s, or the hot parameter's).
	DecisionsPerSecond float64 `json:"decisions_per_second"`
	// Keys are the keys of highest rate, with their admitted and denied rates.
	Keys []TopKey `json:"keys"`
	// Hot is the hot parameter's sketch, for hot limits.
	Hot *HotView `json:"hot,omitempty"`
}

// TopKey is one key's rates, per second.
type TopKey struct {
	// Key is the descriptor's store key, each request value hashed (HashPrefix) unless the
	// rules name it or allow it raw (config.Limit.RawValues).
	Key          string  `json:"key"`
	AdmittedRate float64 `json:"admitted_rate"`
	DeniedRate   float64 `json:"denied_rate"`
}

// HotView is a hot parameter's sketch.
type HotView struct {
	ColdLimit  int64          `json:"cold_limit"`
	ColdAdmits int64          `json:"cold_admits"`
	StoreCalls int64          `json:"store_calls"`
	Values     []hotkey.Value `json:"values"`
}

// Top builds the live view with the n keys of highest rate per limit (at most ViewTopK),
// and the hot parameters' sketches.
func (e *Engine) Top(n int) TopResponse {
	st := e.rules.Load()
	resp := TopResponse{Store: e.storeView(), Domains: []TopDomain{}}
	for _, name := range st.cfg.Domains() {
		resp.Domains = append(resp.Domains, TopDomain{Domain: name, Limits: []TopLimit{}})
	}
	for _, l := range st.cfg.Limits() {
		info := &st.limits[l.Index]
		tl := TopLimit{Name: l.Name, FullKey: l.FullKey, Keys: []TopKey{}}
		for i, r := range l.Rules {
			d := r.String()
			switch {
			case l.IsLocal(i):
				d += " (local)"
			case l.IsGlobal(i):
				d += " (global)"
			}
			tl.Rules = append(tl.Rules, d)
		}
		if l.Unlimited {
			tl.Rules = append(tl.Rules, "unlimited")
		}
		if view := viewOf(info); view != nil {
			keys, total := view.Top(n)
			tl.DecisionsPerSecond = total
			for _, k := range keys {
				tl.Keys = append(tl.Keys, TopKey{Key: redactKey(k.Value, l.RawValues), AdmittedRate: max(0, k.Rate-k.DeniedRate), DeniedRate: k.DeniedRate})
			}
		}
		if info.hot != nil {
			values, _ := info.hot.Tracker().Top(0)
			for i := range values {
				values[i].Value = redactKey(values[i].Value, l.RawValues)
			}
			stats := info.hot.Stats()
			tl.Hot = &HotView{ColdLimit: info.hot.ColdLimit(), ColdAdmits: stats.ColdAdmits, StoreCalls: stats.StoreCalls, Values: values}
		}
		for i := range resp.Domains {
			if resp.Domains[i].Domain == l.Domain {
				resp.Domains[i].Limits = append(resp.Domains[i].Limits, tl)
			}
		}
	}
	return resp
}

func (e *Engine) storeView() StoreView {
	sc := e.cfg.StoreConfig
	v := StoreView{URL: "memory", Mode: sc.Mode, Fallback: sc.Fallback, Circuit: "store"}
	if v.Mode == "" {
		v.Mode = "sync"
	}
	switch {
	case e.cfg.Store != nil:
		v.URL = "custom"
	case sc.URL != "":
		v.URL = store.Redact(sc.URL) // a URL that does not parse was shown whole
	}
	if e.fallback != nil {
		v.Circuit = e.fallback.circuit().String()
		v.Degraded = e.fallback.degraded()
	}
	return v
}

// EachTop calls fn, for each limit of the rules in force that was decided since it came
// into force (or before, when a reload kept it), with its n keys of highest rate: the
// sluice_top_key_rate gauges of package server/rlsmetrics. Each key is shown as the live view
// shows it (hashed unless the rules allow it raw); keys is reused between calls.
func (e *Engine) EachTop(n int, fn func(l *config.Limit, keys []TopKey)) {
	st := e.rules.Load()
	var keys []TopKey
	for _, l := range st.cfg.Limits() {
		view := viewOf(&st.limits[l.Index])
		if view == nil {
			continue
		}
		top, _ := view.Top(n)
		keys = keys[:0]
		for _, k := range top {
			keys = append(keys, TopKey{Key: redactKey(k.Value, l.RawValues), AdmittedRate: max(0, k.Rate-k.DeniedRate), DeniedRate: k.DeniedRate})
		}
		fn(l, keys)
	}
}
