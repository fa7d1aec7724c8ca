package peerstats

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/statsd_exporter/pkg/mapper"
)

// peerMappingFiles are the mapping files of the systems Sluice replaces envoyproxy/ratelimit
// in, copied verbatim (their source is in each file's header): every one says
// `timer_type: "histogram"`, which statsd_exporter v0.31.0 refuses and v0.26.1 (the peer's)
// reads as observer_type.
var peerMappingFiles = []string{
	"testdata/envoy-gateway-v1.9.0-statsd_conf.yaml",
	"testdata/envoyproxy-ratelimit-README-mapping.yaml",
	"testdata/envoyproxy-ratelimit-default_mapper.yaml",
}

// TestPeerMappingFiles (issue 30): Envoy Gateway's statsd_conf.yaml, the peer's README
// mapping and its default mapping start, and map the peer's stats as v0.26.1 does: the
// counters under their mapped names and labels (two- and three-level keys), the response time
// a histogram (timer_type: histogram), not v0.31.0's default summary.
func TestPeerMappingFiles(t *testing.T) {
	for _, file := range peerMappingFiles {
		t.Run(file, func(t *testing.T) {
			s, err := Start(Config{MapperFile: file, FlushInterval: time.Hour})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			s.Store.NewCounter("ratelimit.service.rate_limit.dom.k1.total_hits").Add(3)
			s.Store.NewCounter("ratelimit.service.rate_limit.dom.k1.k2.over_limit").Add(2)
			s.Store.NewCounter("ratelimit_server.ShouldRateLimit.total_requests").Add(5)
			s.Store.NewTimer("ratelimit_server.ShouldRateLimit.response_time").AddValue(12)
			s.Close()
			fams := gather(t, s.Mapped)
			for _, want := range []struct{ name, labels string }{
				{"ratelimit_service_rate_limit_total_hits", `domain="dom",key1="k1"`},
				{"ratelimit_service_rate_limit_over_limit", `domain="dom",key1="k1",key2="k2"`},
				{"ratelimit_service_total_requests", `grpc_method="ShouldRateLimit"`},
			} {
				if got := fams[want.name]; !strings.Contains(got, "{"+want.labels+"}") {
					t.Errorf("%s: %q, want the series {%s}", want.name, got, want.labels)
				}
			}
			if got := fams["ratelimit_service_response_time_seconds"]; !strings.HasPrefix(got, "HISTOGRAM") {
				t.Errorf("ratelimit_service_response_time_seconds: %q, want a histogram (timer_type: histogram)", got)
			}
		})
	}
}

// gather returns each family of g as its type and its series' labels.
func gather(t *testing.T, g prometheus.Gatherer) map[string]string {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range fams {
		var b strings.Builder
		b.WriteString(f.GetType().String())
		for _, m := range f.GetMetric() {
			b.WriteString(" {" + labelsOf(m) + "}")
		}
		out[f.GetName()] = b.String()
	}
	return out
}

func labelsOf(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return strings.Join(parts, ",")
}

// TestUpgradeMapping: each v0.26.1 reading, file by file: the old file maps as the v0.31.0
// file of the same meaning; what v0.26.1 refused is refused.
func TestUpgradeMapping(t *testing.T) {
	for _, tc := range []struct {
		name, old, same, err string
		ignored              []string
	}{
		{name: "timer_type is observer_type",
			old:  "mappings:\n- {match: a.*, name: x_$1, timer_type: histogram}\n",
			same: "mappings:\n- {match: a.*, name: x_$1, observer_type: histogram}\n"},
		{name: "observer_type wins over timer_type",
			old:  "mappings:\n- {match: a.*, name: x, timer_type: histogram, observer_type: summary}\n",
			same: "mappings:\n- {match: a.*, name: x, observer_type: summary}\n"},
		{name: "defaults' timer_type",
			old:  "defaults: {timer_type: histogram}\nmappings:\n- {match: a.*, name: x}\n",
			same: "defaults: {observer_type: histogram}\nmappings:\n- {match: a.*, name: x}\n"},
		{name: "a repeated key: the last is read (v0.26.1's non-strict decode; FuzzUpgradeMapping's find)",
			old:     "mappings:\n- match: a.*\n  timer_type: summary\n  name: y\n  timer_type: histogram\n  name: x\n",
			same:    "mappings:\n- {match: a.*, name: x, observer_type: histogram}\n",
			ignored: []string{"mappings[0].timer_type", "mappings[0].name"}},
		{name: "a bad timer_type is refused", old: "mappings:\n- {match: a.*, name: x, timer_type: hist}\n", err: "invalid observer type"},
		{name: "top-level buckets of a histogram",
			old:  "mappings:\n- {match: a.*, name: x, timer_type: histogram, buckets: [1, 2]}\n",
			same: "mappings:\n- {match: a.*, name: x, observer_type: histogram, histogram_options: {buckets: [1, 2]}}\n"},
		{name: "top-level buckets of a summary are ignored",
			old:  "mappings:\n- {match: a.*, name: x, observer_type: summary, buckets: [1, 2]}\n",
			same: "mappings:\n- {match: a.*, name: x, observer_type: summary}\n"},
		{name: "top-level quantiles of a summary (unknown keys of an objective dropped)",
			old:     "mappings:\n- {match: a.*, name: x, timer_type: summary, quantiles: [{quantile: 0.9, error: 0.01, weight: 2}]}\n",
			same:    "mappings:\n- {match: a.*, name: x, observer_type: summary, summary_options: {quantiles: [{quantile: 0.9, error: 0.01}]}}\n",
			ignored: []string{"mappings[0].quantiles[0].weight"}},
		{name: "buckets at both levels are refused",
			old: "mappings:\n- {match: a.*, name: x, buckets: [1], histogram_options: {buckets: [2]}}\n", err: "both the top level"},
		{name: "defaults' buckets replace the histogram options without buckets",
			old:  "defaults: {observer_type: histogram, buckets: [3], histogram_options: {native_histogram_max_buckets: 9}}\nmappings:\n- {match: a.*, name: x}\n",
			same: "defaults: {observer_type: histogram, histogram_options: {buckets: [3]}}\nmappings:\n- {match: a.*, name: x}\n"},
		{name: "defaults' quantiles",
			old:  "defaults: {quantiles: [{quantile: 0.5, error: 0.1}]}\nmappings:\n- {match: a.*, name: x}\n",
			same: "defaults: {summary_options: {quantiles: [{quantile: 0.5, error: 0.1}]}}\nmappings:\n- {match: a.*, name: x}\n"},
		{name: "match_metric_type timer is observer",
			old:  "mappings:\n- {match: a.*, name: x, match_metric_type: timer}\n",
			same: "mappings:\n- {match: a.*, name: x, match_metric_type: observer}\n"},
		{name: "$0 of a glob is nothing",
			old:  "mappings:\n- {match: a.*, name: \"x${0}_$1\", labels: {lab: \"$0\", mab: \"v$1\"}}\n",
			same: "mappings:\n- {match: a.*, name: x_$1, labels: {lab: \"\", mab: \"v$1\"}}\n"},
		{name: "$0 of a regex is the match",
			old:  "mappings:\n- {match: 'a\\.(.*)', match_type: regex, name: x, labels: {lab: \"$0\"}}\n",
			same: "mappings:\n- {match: 'a\\.(.*)', match_type: regex, name: x, labels: {lab: \"$0\"}}\n"},
		{name: "unknown keys are ignored, at every level",
			old:     "extra: 1\ndefaults: {colour: red, histogram_options: {width: 2}}\nmappings:\n- {match: a.*, name: x, comment: hi, summary_options: {depth: 1}}\n",
			same:    "defaults: {histogram_options: {}}\nmappings:\n- {match: a.*, name: x, summary_options: {}}\n",
			ignored: []string{"extra", "defaults.colour", "defaults.histogram_options.width", "mappings[0].comment", "mappings[0].summary_options.depth"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ignored, _, err := upgradeLoad(tc.old)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := &mapper.MetricMapper{}
			if err := want.InitFromYAMLString(tc.same); err != nil {
				t.Fatalf("the v0.31.0 file: %v", err)
			}
			if diff := sameMapping(got, want, []string{"a.b", "a.c.d", "a"}); diff != "" {
				t.Error(diff)
			}
			if strings.Join(ignored, " ") != strings.Join(tc.ignored, " ") {
				t.Errorf("ignored %q, want %q", ignored, tc.ignored)
			}
		})
	}
}

// upgradeLoad is loadMapping of the file contents old.
func upgradeLoad(old string) (*mapper.MetricMapper, []string, []string, error) {
	out, ignored, upgraded, err := upgradeMapping([]byte(old))
	if err != nil {
		return nil, nil, nil, err
	}
	m := &mapper.MetricMapper{}
	return m, ignored, upgraded, m.InitFromYAMLString(string(out))
}

// sameMapping reports how got and want map each of names, as each statsd type, and how they
// observe (the defaults), or "" when they agree.
func sameMapping(got, want *mapper.MetricMapper, names []string) string {
	if !reflect.DeepEqual(got.Defaults, want.Defaults) {
		return fmt.Sprintf("defaults %+v, want %+v", got.Defaults, want.Defaults)
	}
	for _, name := range names {
		for _, typ := range []mapper.MetricType{mapper.MetricTypeCounter, mapper.MetricTypeGauge, mapper.MetricTypeObserver} {
			g, gl, gok := got.GetMapping(name, typ)
			w, wl, wok := want.GetMapping(name, typ)
			if gok != wok || !reflect.DeepEqual(gl, wl) || gok && !reflect.DeepEqual(visible(g), visible(w)) {
				return fmt.Sprintf("%s as %s: %v %v %+v, want %v %v %+v", name, typ, gok, gl, visible(g), wok, wl, visible(w))
			}
		}
	}
	return ""
}

// visible is what a mapping result decides.
func visible(m *mapper.MetricMapping) any {
	if m == nil {
		return nil
	}
	return struct {
		Name          string
		Observer      mapper.ObserverType
		Action        mapper.ActionType
		Honor         bool
		Help          string
		TTL           time.Duration
		Scale         mapper.MaybeFloat64
		Hist          *mapper.HistogramOptions
		Summary       *mapper.SummaryOptions
		MatchType     mapper.MatchType
		MatchMetricTy mapper.MetricType
	}{m.Name, m.ObserverType, m.Action, m.HonorLabels, m.HelpText, m.Ttl, m.Scale, m.HistogramOptions, m.SummaryOptions, m.MatchType, m.MatchMetricType}
}

// TestUpgradeMappingProperty: a file spelled with any mix of v0.26.1's legacy fields and
// unknown keys maps as the same file in v0.31.0's spelling, derived from v0.26.1's reading
// (its mapping.go, mapper_defaults.go and InitFromYAMLString), over random files.
func TestUpgradeMappingProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 1))
	names := []string{"a.b.c", "a.x.c", "q.r", "a.b.c.d", "s.t"}
	for i := range 500 {
		old, same := randomMappingFile(r)
		got, _, _, err := upgradeLoad(old)
		want := &mapper.MetricMapper{}
		werr := want.InitFromYAMLString(same)
		if (err != nil) != (werr != nil) {
			t.Fatalf("file %d: error %v, the v0.31.0 file's %v\nold:\n%s\nsame:\n%s", i, err, werr, old, same)
		}
		if err != nil {
			continue
		}
		if diff := sameMapping(got, want, names); diff != "" {
			t.Fatalf("file %d: %s\nold:\n%s\nsame:\n%s", i, diff, old, same)
		}
	}
}

// randomMappingFile returns a file in v0.26.1's spelling (legacy fields, unknown keys) and
// the file of the same meaning in v0.31.0's.
func randomMappingFile(r *rand.Rand) (old, same string) {
	var o, s bytes.Buffer
	unknown := func(b *bytes.Buffer, indent string) {
		if r.IntN(4) == 0 {
			fmt.Fprintf(b, "%sx_unknown_%d: %d\n", indent, r.IntN(9), r.IntN(9))
		}
	}
	unknown(&o, "")
	// The defaults' observer type: none, spelled new or old (timer_type), or both.
	defObs := []string{"", "histogram", "summary"}[r.IntN(3)]
	o.WriteString("defaults:\n")
	s.WriteString("defaults:\n")
	unknown(&o, "  ")
	if defObs != "" {
		switch r.IntN(3) {
		case 0:
			fmt.Fprintf(&o, "  observer_type: %s\n", defObs)
		case 1:
			fmt.Fprintf(&o, "  timer_type: %s\n", defObs)
		default:
			fmt.Fprintf(&o, "  observer_type: %s\n  timer_type: %s\n", defObs, []string{"histogram", "summary"}[r.IntN(2)])
		}
		fmt.Fprintf(&s, "  observer_type: %s\n", defObs)
	}
	if r.IntN(3) == 0 { // legacy default buckets replace histogram_options with no buckets
		fmt.Fprintf(&o, "  buckets: [1, 5]\n  histogram_options: {native_histogram_max_buckets: 7}\n")
		fmt.Fprintf(&s, "  histogram_options: {buckets: [1, 5]}\n")
	} else if r.IntN(2) == 0 {
		fmt.Fprintf(&o, "  histogram_options: {buckets: [2, 4], native_histogram_max_buckets: 7}\n")
		fmt.Fprintf(&s, "  histogram_options: {buckets: [2, 4], native_histogram_max_buckets: 7}\n")
	}
	if r.IntN(3) == 0 {
		fmt.Fprintf(&o, "  quantiles: [{quantile: 0.7, error: 0.02}]\n")
		fmt.Fprintf(&s, "  summary_options: {quantiles: [{quantile: 0.7, error: 0.02}]}\n")
	}
	o.WriteString("mappings:\n")
	s.WriteString("mappings:\n")
	for i := range 1 + r.IntN(4) {
		regex := r.IntN(4) == 0
		var match, name, label string
		if regex {
			match, name, label = `'(a|q)\.(.*)'`, fmt.Sprintf("m%d_$0", i), "$0"
		} else {
			match = []string{"a.*.c", "q.*", "a.b.*", "*.t"}[r.IntN(4)]
			name, label = fmt.Sprintf("m%d_$1", i), "$1"
		}
		oname, sname, olabel, slabel := name, name, label, label
		if !regex && r.IntN(3) == 0 { // v0.26.1: $0 of a glob is nothing
			oname, sname = fmt.Sprintf("m%d_${0}x", i), fmt.Sprintf("m%d_x", i)
			olabel, slabel = "v$0", "v"
		}
		line := func(b *bytes.Buffer, name, label string) {
			fmt.Fprintf(b, "- match: %s\n  name: %s\n  labels: {lab: %q}\n", match, name, label)
			if regex {
				b.WriteString("  match_type: regex\n")
			}
		}
		line(&o, oname, olabel)
		line(&s, sname, slabel)
		unknown(&o, "  ")
		obs := []string{"", "histogram", "summary"}[r.IntN(3)]
		if obs != "" {
			switch r.IntN(3) {
			case 0:
				fmt.Fprintf(&o, "  observer_type: %s\n", obs)
			case 1:
				fmt.Fprintf(&o, "  timer_type: %s\n", obs)
			default:
				fmt.Fprintf(&o, "  timer_type: %s\n  observer_type: %s\n", []string{"histogram", "summary"}[r.IntN(2)], obs)
			}
			fmt.Fprintf(&s, "  observer_type: %s\n", obs)
		}
		effective := obs
		if effective == "" {
			effective = defObs
		}
		switch r.IntN(3) { // buckets: legacy (used only by a histogram), new, none
		case 0:
			o.WriteString("  buckets: [0.5, 3]\n")
			if effective == "histogram" {
				s.WriteString("  histogram_options: {buckets: [0.5, 3]}\n")
			}
		case 1:
			if effective != "summary" {
				o.WriteString("  histogram_options: {buckets: [0.25], x_unknown: 1}\n")
				s.WriteString("  histogram_options: {buckets: [0.25]}\n")
			}
		}
		if r.IntN(3) == 0 { // quantiles: legacy, used only by a summary
			o.WriteString("  quantiles: [{quantile: 0.6, error: 0.05}]\n")
			if effective == "summary" {
				s.WriteString("  summary_options: {quantiles: [{quantile: 0.6, error: 0.05}]}\n")
			}
		}
		switch mt := []string{"", "counter", "observer", "timer"}[r.IntN(4)]; mt {
		case "":
		case "timer":
			o.WriteString("  match_metric_type: timer\n")
			s.WriteString("  match_metric_type: observer\n")
		default:
			fmt.Fprintf(&o, "  match_metric_type: %s\n", mt)
			fmt.Fprintf(&s, "  match_metric_type: %s\n", mt)
		}
	}
	return o.String(), s.String()
}

// FuzzUpgradeMapping: upgradeMapping never panics, and what it writes needs no upgrade: a
// second pass changes nothing and finds nothing to ignore or rewrite.
func FuzzUpgradeMapping(f *testing.F) {
	for _, file := range peerMappingFiles {
		if data, err := testdataFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("defaults: {timer_type: histogram, buckets: [1], quantiles: [{quantile: 0.5}]}\nmappings:\n- {match: a.*, name: x$0, timer_type: summary, x: 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, _, _, err := upgradeMapping(data)
		if err != nil {
			return
		}
		again, ignored, upgraded, err := upgradeMapping(out)
		if err != nil || len(ignored) > 0 || len(upgraded) > 0 || !bytes.Equal(again, out) {
			t.Fatalf("second pass: %v, ignored %q, upgraded %q\nfirst:\n%s\nsecond:\n%s", err, ignored, upgraded, out, again)
		}
	})
}

func testdataFile(name string) ([]byte, error) { return os.ReadFile(name) }
