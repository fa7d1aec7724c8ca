package rls

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/store"
)

// The live view (GET /v1/top, /ui and the sluice_top_key_rate gauges) tracks, per limit, the
// keys of highest rate over the last viewPeriod in a Space-Saving sketch of ViewTopK keys:
// bounded memory whatever the number of keys. A hot parameter's own sketch serves instead.
const (
	ViewTopK      = 64
	viewPeriod    = 10 * time.Second
	metricTopKeys = 10 // keys per limit in sluice_top_key_rate: bounded cardinality
)

// previous returns the limit of the rules in force that l replaces unchanged (same domain,
// descriptor, rules and hot parameter), so a reload keeps what its sketches learned.
func (e *Engine) previous(l *config.Limit) *limitInfo {
	old := e.rules.Load()
	if old == nil {
		return nil
	}
	for _, ol := range old.cfg.Limits() {
		if ol.Domain == l.Domain && ol.FullKey == l.FullKey && sameRules(ol, l) {
			return &old.limits[ol.Index]
		}
	}
	return nil
}

func sameRules(a, b *config.Limit) bool {
	if len(a.Rules) != len(b.Rules) || (a.Hot == nil) != (b.Hot == nil) || (a.Hot != nil && *a.Hot != *b.Hot) {
		return false
	}
	for i := range a.Rules {
		if a.Rules[i] != b.Rules[i] || a.IsLocal(i) != b.IsLocal(i) {
			return false
		}
	}
	return true
}

// viewTracker returns the tracker of limit l: its hot parameter's, or one of its own.
func (e *Engine) viewTracker(l *config.Limit, hot *hotkey.Param) *hotkey.Tracker {
	if hot != nil {
		return hot.Tracker()
	}
	if prev := e.previous(l); prev != nil && prev.view != nil {
		return prev.view
	}
	return hotkey.NewTracker(ViewTopK, viewPeriod, nil)
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
	// Fallback is the fallback policy ("" without), State "store" or "fallback", and
	// Degraded why decisions are the fallback's ("" in the store state).
	Fallback string `json:"fallback,omitempty"`
	State    string `json:"state"`
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
			if l.IsLocal(i) {
				d += " (local)"
			}
			tl.Rules = append(tl.Rules, d)
		}
		if l.Unlimited {
			tl.Rules = append(tl.Rules, "unlimited")
		}
		if info.view != nil {
			keys, total := info.view.Top(n)
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
	v := StoreView{URL: "memory", Mode: sc.Mode, Fallback: sc.Fallback, State: "store"}
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
		v.State = e.fallback.State().String()
		v.Degraded = e.fallback.degraded()
	}
	return v
}

// topCollector exports the metricTopKeys keys of highest rate of each limit as gauges:
// sluice_top_key_rate{domain, limit, rank, key, result}. The cardinality at any time is
// bounded by limits x metricTopKeys x 2.
type topCollector struct{ e *Engine }

var topKeyDesc = prometheus.NewDesc("sluice_top_key_rate",
	"Requests per second of the keys of highest rate of each limit (over the last 10 s, or the hot parameter's period), by result (admitted, denied); rank 1 is the highest.",
	[]string{"domain", "limit", "rank", "key", "result"}, nil)

func (c topCollector) Describe(ch chan<- *prometheus.Desc) { ch <- topKeyDesc }

func (c topCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.e.rules.Load()
	if st == nil {
		return
	}
	for _, l := range st.cfg.Limits() {
		view := st.limits[l.Index].view
		if view == nil {
			continue
		}
		keys, _ := view.Top(metricTopKeys)
		for i, k := range keys {
			rank, key := strconv.Itoa(i+1), redactKey(k.Value, l.RawValues)
			ch <- prometheus.MustNewConstMetric(topKeyDesc, prometheus.GaugeValue, max(0, k.Rate-k.DeniedRate), l.Domain, l.FullKey, rank, key, "admitted")
			ch <- prometheus.MustNewConstMetric(topKeyDesc, prometheus.GaugeValue, k.DeniedRate, l.Domain, l.FullKey, rank, key, "denied")
		}
	}
}
