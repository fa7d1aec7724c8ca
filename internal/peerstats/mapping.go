package peerstats

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"

	"github.com/prometheus/statsd_exporter/pkg/mapper"
	"go.yaml.in/yaml/v2"
)

// The peer, envoyproxy/ratelimit, reads PROMETHEUS_MAPPER_YAML with statsd_exporter v0.26.1's
// mapper (its go.mod); Sluice links v0.31.0's, which dropped what v0.26.1 still read, so a
// file the peer takes (Envoy Gateway's own statsd_conf.yaml, the peer's README example:
// `timer_type: "histogram"` in every mapping) would stop sluice serve. upgradeMapping turns
// such a file into the v0.31.0 file of the same meaning, before v0.31.0 reads it:
//
//   - v0.26.1 decoded with yaml.Unmarshal, not UnmarshalStrict: a key it did not know was
//     ignored. Such keys are dropped here (and named, for a warning).
//   - timer_type (a mapping's and the defaults') was read as observer_type when that is unset.
//   - A mapping's buckets and quantiles were its histogram_options.buckets and
//     summary_options.quantiles (for a histogram, resp. a summary; both levels at once was an
//     error); the defaults' replaced defaults.histogram_options and .summary_options when those
//     had none.
//   - match_metric_type: timer was observer.
//   - In a glob mapping's name and labels, $0 (or ${0}) was replaced by nothing; v0.31.0 puts
//     the whole statsd name there. It is rewritten to a capture that does not exist, which both
//     versions replace by nothing.
//
// A file v0.26.1 refused (a bad value, a bad type) is refused too, by v0.31.0 or here.

// mappingKeys are the keys each level of a mapping file may hold in v0.31.0, and the
// legacy ones v0.26.1 also read there.
var (
	fileKeys      = keys("defaults", "mappings")
	defaultsKeys  = keys("observer_type", "match_type", "glob_disable_ordering", "ttl", "summary_options", "histogram_options")
	defaultsOld   = keys("timer_type", "buckets", "quantiles")
	mappingKeys   = keys("match", "name", "labels", "honor_labels", "observer_type", "match_type", "help", "action", "match_metric_type", "ttl", "summary_options", "histogram_options", "scale")
	mappingOld    = keys("timer_type", "buckets", "quantiles")
	summaryKeys   = keys("quantiles", "max_age", "age_buckets", "buf_cap")
	histogramKeys = keys("buckets", "native_histogram_bucket_factor", "native_histogram_max_buckets")
	objectiveKeys = keys("quantile", "error")
)

func keys(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// loadMapping reads the mapping file at path as the peer's statsd_exporter v0.26.1 reads it
// (upgradeMapping) into v0.31.0's mapper. ignored names the keys v0.26.1 ignored, upgraded
// the legacy fields it read.
func loadMapping(path string) (m *mapper.MetricMapper, ignored, upgraded []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	out, ignored, upgraded, err := upgradeMapping(data)
	if err != nil {
		return nil, nil, nil, err
	}
	m = &mapper.MetricMapper{}
	if err := m.InitFromYAMLString(string(out)); err != nil {
		return nil, nil, nil, err
	}
	return m, ignored, upgraded, nil
}

// upgradeMapping returns the v0.31.0 mapping file of the v0.26.1 file data (see the comment
// above), the keys dropped as v0.26.1 ignored them and the legacy fields rewritten, each by
// its path in the file.
func upgradeMapping(data []byte) (out []byte, ignored, upgraded []string, err error) {
	var file yaml.MapSlice
	if err := yaml.Unmarshal(data, &file); err != nil {
		return nil, nil, nil, err
	}
	u := upgrader{}
	file = u.keep(file, "", fileKeys, nil)
	defaultObserver := ""
	if d, ok := get(file, "defaults"); ok {
		ds, err := u.defaults(d)
		if err != nil {
			return nil, nil, nil, err
		}
		set(&file, "defaults", ds)
		defaultObserver = observerOf(ds)
	}
	if ms, ok := get(file, "mappings"); ok {
		list, isList := ms.([]any)
		if !isList {
			return nil, nil, nil, fmt.Errorf("mappings: want a list, got %T", ms)
		}
		globDefault := true
		if d, ok := get(file, "defaults"); ok {
			if mt, ok := get(asMap(d), "match_type"); ok && fmt.Sprint(mt) == string(mapper.MatchTypeRegex) {
				globDefault = false
			}
		}
		for i, item := range list {
			m, err := u.mapping(item, fmt.Sprintf("mappings[%d]", i), defaultObserver, globDefault)
			if err != nil {
				return nil, nil, nil, err
			}
			list[i] = m
		}
	}
	out, err = yaml.Marshal(file)
	return out, u.ignored, u.upgraded, err
}

// upgrader collects what it changed.
type upgrader struct{ ignored, upgraded []string }

// keep returns m without the keys neither known nor old allows, noting them as ignored under
// path. A key that is not a string is dropped too (v0.26.1 could not have read it), and so is
// every occurrence of a repeated key but its last: v0.26.1 decoded the file without
// yaml.v2's strict mode, where a later key overwrites an earlier one (v0.31.0's strict decode
// refuses the repetition).
func (u *upgrader) keep(m yaml.MapSlice, path string, known, old map[string]bool) yaml.MapSlice {
	last := make(map[string]int, len(m))
	for i, it := range m {
		if k, ok := it.Key.(string); ok {
			last[k] = i
		}
	}
	kept := m[:0:0]
	for i, it := range m {
		k, ok := it.Key.(string)
		if ok && (known[k] || old[k]) && last[k] == i {
			kept = append(kept, it)
			continue
		}
		u.ignored = append(u.ignored, join(path, fmt.Sprint(it.Key)))
	}
	return kept
}

// defaults upgrades the defaults section d.
func (u *upgrader) defaults(d any) (yaml.MapSlice, error) {
	if d == nil {
		return nil, nil
	}
	ds, ok := d.(yaml.MapSlice)
	if !ok {
		return nil, fmt.Errorf("defaults: want a map, got %T", d)
	}
	ds = u.keep(ds, "defaults", defaultsKeys, defaultsOld)
	if err := u.options(ds, "defaults"); err != nil {
		return nil, err
	}
	if err := u.timerType(&ds, "defaults"); err != nil {
		return nil, err
	}
	// v0.26.1: the legacy lists replace the whole options block when it has none.
	for _, lf := range []struct{ old, block, list string }{{"buckets", "histogram_options", "buckets"}, {"quantiles", "summary_options", "quantiles"}} {
		v, ok := get(ds, lf.old)
		if !ok {
			continue
		}
		del(&ds, lf.old)
		u.upgraded = append(u.upgraded, "defaults."+lf.old)
		if isEmptyList(v) {
			continue
		}
		if b, ok := get(ds, lf.block); ok {
			if l, ok := get(asMap(b), lf.list); ok && !isEmptyList(l) {
				continue
			}
		}
		set(&ds, lf.block, yaml.MapSlice{{Key: lf.list, Value: v}})
	}
	return ds, nil
}

// mapping upgrades the mapping item at path; defaultObserver is the defaults' observer type
// (observerOf), globDefault says their match type is glob.
func (u *upgrader) mapping(item any, path string, defaultObserver string, globDefault bool) (yaml.MapSlice, error) {
	m, ok := item.(yaml.MapSlice)
	if !ok {
		return nil, fmt.Errorf("%s: want a map, got %T", path, item)
	}
	m = u.keep(m, path, mappingKeys, mappingOld)
	if err := u.options(m, path); err != nil {
		return nil, err
	}
	if err := u.timerType(&m, path); err != nil {
		return nil, err
	}
	if mt, ok := get(m, "match_metric_type"); ok && fmt.Sprint(mt) == "timer" {
		set(&m, "match_metric_type", string(mapper.MetricTypeObserver))
		u.upgraded = append(u.upgraded, path+".match_metric_type")
	}
	observer := observerOf(m)
	if observer == "" {
		observer = defaultObserver
	}
	match, _ := get(m, "match")
	for _, lf := range []struct {
		old, block, list string
		applies          bool
	}{{"buckets", "histogram_options", "buckets", observer == string(mapper.ObserverTypeHistogram)},
		{"quantiles", "summary_options", "quantiles", observer == string(mapper.ObserverTypeSummary)}} {
		v, ok := get(m, lf.old)
		if !ok {
			continue
		}
		del(&m, lf.old)
		u.upgraded = append(u.upgraded, path+"."+lf.old)
		if v == nil {
			continue
		}
		b, hasBlock := get(m, lf.block)
		if l, ok := get(asMap(b), lf.list); hasBlock && ok && l != nil {
			return nil, fmt.Errorf("cannot use %s in both the top level and %s at the same time in %v", lf.old, lf.block, match)
		}
		if !lf.applies || isEmptyList(v) {
			continue
		}
		block := asMap(b)
		set(&block, lf.list, v)
		set(&m, lf.block, block)
	}
	glob := globDefault
	if mt, ok := get(m, "match_type"); ok {
		glob = fmt.Sprint(mt) != string(mapper.MatchTypeRegex)
	}
	if glob {
		u.noCaptureZero(m, path)
	}
	return m, nil
}

// timerType moves *m's timer_type to observer_type when that is unset (else drops it), after
// checking its value as v0.26.1 did.
func (u *upgrader) timerType(m *yaml.MapSlice, path string) error {
	v, ok := get(*m, "timer_type")
	if !ok {
		return nil
	}
	switch s := fmt.Sprint(v); {
	case v == nil, s == string(mapper.ObserverTypeHistogram), s == string(mapper.ObserverTypeSummary):
	default:
		return fmt.Errorf("%s.timer_type: invalid observer type '%s'", path, s)
	}
	del(m, "timer_type")
	if _, set := get(*m, "observer_type"); !set && v != nil { // null sets nothing, in both
		*m = append(*m, yaml.MapItem{Key: "observer_type", Value: v})
	}
	u.upgraded = append(u.upgraded, path+".timer_type")
	return nil
}

// options drops the unknown keys of m's histogram_options and summary_options (and of the
// quantiles in them and in m).
func (u *upgrader) options(m yaml.MapSlice, path string) error {
	for i, it := range m {
		k, _ := it.Key.(string)
		var known map[string]bool
		switch k {
		case "histogram_options":
			known = histogramKeys
		case "summary_options":
			known = summaryKeys
		case "quantiles":
			m[i].Value = u.objectives(it.Value, join(path, k))
			continue
		default:
			continue
		}
		b, ok := it.Value.(yaml.MapSlice)
		if !ok {
			continue // null, or a type v0.31.0 refuses as v0.26.1 did
		}
		b = u.keep(b, join(path, k), known, nil)
		for j, bi := range b {
			if bi.Key == "quantiles" {
				b[j].Value = u.objectives(bi.Value, join(path, k+".quantiles"))
			}
		}
		m[i].Value = b
	}
	return nil
}

// objectives drops the unknown keys of each quantile objective of the list v.
func (u *upgrader) objectives(v any, path string) any {
	list, ok := v.([]any)
	if !ok {
		return v
	}
	for i, o := range list {
		if om, ok := o.(yaml.MapSlice); ok {
			list[i] = u.keep(om, fmt.Sprintf("%s[%d]", path, i), objectiveKeys, nil)
		}
	}
	return list
}

// captureRef is statsd_exporter's template reference (fsm.templateReplaceCaptureRE).
var captureRef = regexp.MustCompile(`\$\{?([a-zA-Z0-9_\$]+)\}?`)

// noCapture is a capture index no glob has (it exceeds any match's number of `*`), so both
// versions replace it by nothing, as v0.26.1 replaced $0.
const noCapture = "${2147483647}"

// noCaptureZero rewrites the references to capture 0 in glob mapping m's name and labels.
func (u *upgrader) noCaptureZero(m yaml.MapSlice, path string) {
	fix := func(s string) (string, bool) {
		changed := false
		out := captureRef.ReplaceAllStringFunc(s, func(ref string) string {
			sub := captureRef.FindStringSubmatch(ref)
			if n, err := strconv.Atoi(sub[1]); err == nil && n == 0 {
				changed = true
				return noCapture
			}
			return ref
		})
		return out, changed
	}
	for i, it := range m {
		switch it.Key {
		case "name":
			if s, ok := it.Value.(string); ok {
				if out, changed := fix(s); changed {
					m[i].Value = out
					u.upgraded = append(u.upgraded, path+".name")
				}
			}
		case "labels":
			labels, ok := it.Value.(yaml.MapSlice)
			if !ok {
				continue
			}
			names := make([]string, 0, len(labels))
			for j, l := range labels {
				if s, ok := l.Value.(string); ok {
					if out, changed := fix(s); changed {
						labels[j].Value = out
						names = append(names, fmt.Sprint(l.Key))
					}
				}
			}
			sort.Strings(names)
			for _, n := range names {
				u.upgraded = append(u.upgraded, path+".labels."+n)
			}
		}
	}
}

// observerOf is the observer type m sets as v0.26.1 reads it: "histogram", "summary" (any
// other value, "" too), or "" when it sets none (no key, or null).
func observerOf(m yaml.MapSlice) string {
	switch v, _ := get(m, "observer_type"); {
	case v == nil:
		return ""
	case fmt.Sprint(v) == string(mapper.ObserverTypeHistogram):
		return string(mapper.ObserverTypeHistogram)
	}
	return string(mapper.ObserverTypeSummary)
}

func get(m yaml.MapSlice, key string) (any, bool) {
	for _, it := range m {
		if it.Key == key {
			return it.Value, true
		}
	}
	return nil, false
}

func set(m *yaml.MapSlice, key string, v any) {
	for i, it := range *m {
		if it.Key == key {
			(*m)[i].Value = v
			return
		}
	}
	*m = append(*m, yaml.MapItem{Key: key, Value: v})
}

func del(m *yaml.MapSlice, key string) {
	for i, it := range *m {
		if it.Key == key {
			*m = append((*m)[:i:i], (*m)[i+1:]...)
			return
		}
	}
}

func asMap(v any) yaml.MapSlice {
	m, _ := v.(yaml.MapSlice)
	return m
}

func isEmptyList(v any) bool {
	l, ok := v.([]any)
	return v == nil || ok && len(l) == 0
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
