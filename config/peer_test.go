package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// Ported from envoyproxy/ratelimit's test/config/config_test.go (TestValueToMetric_*,
// TestDetailedMetric, TestShareThreshold, TestWildcardConfig) and its README examples 3, 4, 8,
// 9, 10 and 11: which limit a descriptor gets, and the stats key its metrics are named by.

// peerRules holds the rules of those tests, one domain each.
var peerRules = []string{`
domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
`, `
domain: example10_wildcard
descriptors:
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: minute, requests_per_unit: 100}
`, `
domain: detailed_leaf
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            detailed_metric: true
            rate_limit: {unit: minute, requests_per_unit: 60}
`, `
domain: d
descriptors:
  - key: k1
    value_to_metric: true
    descriptors:
      - key: k2
        rate_limit: {unit: minute, requests_per_unit: 60}
  - key: m1
    descriptors:
      - key: m2
        value_to_metric: true
        descriptors:
          - key: m3
            rate_limit: {unit: minute, requests_per_unit: 60}
  - key: n1
    descriptors:
      - key: n2
        rate_limit: {unit: minute, requests_per_unit: 60}
`, `
domain: configured
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value: GET
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
      - key: http_method
        value: POST
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 30}
`, `
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: key1
    value: value1
    rate_limit: {unit: minute, requests_per_unit: 20}
`, `
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
`, `
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit: {requests_per_unit: 300, unit: second}
  - key: other
    value: value
    descriptors:
      - key: subkey
        rate_limit: {requests_per_unit: 300, unit: second}
`, `
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: path
    value: /api/*/action
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: route
    value: /api/*/resource/*/action
    rate_limit: {unit: minute, requests_per_unit: 20}
`, `
domain: example11_metrics
descriptors:
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 60}
  - key: service
    value: svc/*
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 80}
`}

func TestPeerMetricKeys(t *testing.T) {
	var docs []*config.Document
	for i, r := range peerRules {
		doc, err := config.Decode("peer"+string(rune('a'+i))+".yaml", []byte(r))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
	}
	c, err := config.Compile(docs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, domain string
		entries      string // k=v,k=v
		limit        int64  // requests_per_unit of the limit found; -1: none
		key          string // the peer's stats key
	}{
		{"TestValueToMetric_UsesRuntimeValuesInStats / README example 10", "example10", "route=draw,http_method=GET,subject_id=123", 60, "example10.route_draw.http_method_GET.subject_id"},
		{"README example 10, other values", "example10", "route=web,http_method=POST,subject_id=456", 60, "example10.route_web.http_method_POST.subject_id"},
		{"TestValueToMetric_WithWildcard / README example 10", "example10_wildcard", "user=alice,action=readfile,resource=documents", 100, "example10_wildcard.user_alice.action_readfile.resource"},
		{"TestValueToMetric_DoesNotOverrideDetailedMetric", "detailed_leaf", "route=draw,http_method=GET,subject_id=123", 60, "detailed_leaf.route_draw.http_method_GET.subject_id_123"},
		{"TestValueToMetric_DefaultKeyIncludesValueAtThatLevel", "d", "k1=A,k2=foo", 60, "d.k1_A.k2"},
		{"TestValueToMetric_MidLevelOnly", "d", "m1=X,m2=Y,m3=Z", 60, "d.m1.m2_Y.m3"},
		{"TestValueToMetric_NoFlag_Unchanged", "d", "n1=X,n2=Y", 60, "d.n1.n2"},
		{"TestValueToMetric_WithEmptyValue", "example10", "route=,http_method=GET,subject_id=123", 60, "example10.route.http_method_GET.subject_id"},
		{"TestValueToMetric_WithEmptyValue, the middle", "example10", "route=draw,http_method=,subject_id=123", 60, "example10.route_draw.http_method.subject_id"},
		{"TestValueToMetric_WithConfiguredValues", "configured", "route=api,http_method=GET,subject_id=user123", 60, "configured.route_api.http_method_GET.subject_id"},
		{"TestValueToMetric_WithConfiguredValues, POST", "configured", "route=api,http_method=POST,subject_id=user456", 30, "configured.route_api.http_method_POST.subject_id"},
		{"README example 8: detailed_metric", "example8", "key1=unspecified_value", 10, "example8.key1_unspecified_value"},
		{"README example 8: a configured value", "example8", "key1=value1", 20, "example8.key1_value1"},
		{"README example 3: any address", "edge_proxy_per_ip", "remote_address=50.0.0.1", 10, "edge_proxy_per_ip.remote_address"},
		{"README example 3: the exact value first (a block)", "edge_proxy_per_ip", "remote_address=50.0.0.5", 0, "edge_proxy_per_ip.remote_address_50.0.0.5"},
		{"README example 4: more entries than levels", "example4", "key=value,subkey=subvalue", -1, ""},
		{"README example 4: as many as levels", "example4", "other=value,subkey=subvalue", 300, "example4.other_value.subkey"},
		{"README example 9: trailing", "example9", "key1=valueXYZ", 20, "example9.key1_value*"},
		{"README example 9: middle", "example9", "path=/api/user-id/action", 20, "example9.path_/api/*/action"},
		{"README example 9: middle, no match", "example9", "path=/api/123/other", -1, ""},
		{"README example 9: several", "example9", "route=/api/v2/resource/456/action", 20, "example9.route_/api/*/resource/*/action"},
		{"TestShareThreshold: share_threshold beats value_to_metric", "example11_metrics", "route=api/v1,method=GET", 60, "example11_metrics.route_api/*.method"},
		{"TestShareThreshold: share_threshold with detailed_metric", "example11_metrics", "service=svc/a,endpoint=get", 80, "example11_metrics.service_svc/*.endpoint_get"},
	} {
		var es []entry
		for _, kv := range strings.Split(tc.entries, ",") {
			k, v, _ := strings.Cut(kv, "=")
			es = append(es, entry{k, v})
		}
		d := c.Domain(tc.domain)
		l := config.Lookup(d, es)
		switch {
		case l == nil && tc.limit >= 0:
			t.Errorf("%s: no limit, want %d", tc.name, tc.limit)
		case l != nil && tc.limit < 0:
			t.Errorf("%s: limit %s, want none", tc.name, l.FullKey)
		case l != nil && int64(l.RequestsPerUnit) != tc.limit:
			t.Errorf("%s: limit %d, want %d", tc.name, l.RequestsPerUnit, tc.limit)
		case l != nil:
			if got := config.MetricKey(d, es, l); got != tc.key {
				t.Errorf("%s: stats key %q, want %q", tc.name, got, tc.key)
			}
		}
	}
}

// TestPeerLookupShared: the entries matched by a share_threshold wildcard are reported with
// their pattern, whatever level the limit is at (TestShareThreshold's nested cases).
func TestPeerLookupShared(t *testing.T) {
	c := mustCompile(t, `
domain: s
descriptors:
  - key: files
    value: top/*
    share_threshold: true
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 300}
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        descriptors:
          - key: type
            rate_limit: {unit: minute, requests_per_unit: 120}
`)
	d := c.Domain("s")
	shared := make([]string, 3)
	if l := config.LookupShared(d, []entry{{"files", "top/a"}, {"files", "nested/b"}}, shared); l == nil || strings.Join(shared[:2], "|") != "top/*|nested/*" {
		t.Errorf("both levels: %v %q", l, shared[:2])
	}
	if l := config.LookupShared(d, []entry{{"path", "path/1"}, {"file", "file/1"}, {"type", "t"}}, shared); l == nil || strings.Join(shared, "|") != "path/*||" {
		t.Errorf("parent only: %v %q", l, shared)
	}
	es := []entry{{"files", "top/a"}, {"files", "nested/b"}}
	if n := testing.AllocsPerRun(100, func() { config.LookupShared(d, es, shared) }); n != 0 {
		t.Errorf("LookupShared allocates %v times", n)
	}
}

// TestPeerRuntimeTree: Options.Tree reads a directory as envoyproxy/ratelimit's runtime
// loader does — every file below it, recursively, whatever its name — with the dot files
// only under DotFiles (the peer's RUNTIME_IGNOREDOTFILES=false); MergeDomains merges files of
// one domain; DefaultAlgorithm applies to rate limits that name none.
func TestPeerRuntimeTree(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.conf", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 0}\n")
	write("sub/b", "domain: a\ndescriptors:\n  - key: j\n    rate_limit: {unit: minute, unit_multiplier: 5, requests_per_unit: 3}\n")
	write(".hidden/c.yaml", "domain: c\ndescriptors: []\n")
	if _, err := config.LoadWith(dir, config.Options{Tree: true}); err == nil || !strings.Contains(err.Error(), `duplicate domain "a"`) {
		t.Errorf("two files of one domain without MergeDomains: %v", err)
	}
	c, err := config.LoadWith(dir, config.Options{Tree: true, MergeDomains: true, DefaultAlgorithm: sluice.AlgorithmFixedWindow})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Domains(), ","); got != "a" {
		t.Errorf("domains %s, want a (no dot files)", got)
	}
	d := c.Domain("a")
	if l := config.Lookup(d, []entry{{"k", "x"}}); l == nil || !l.Block {
		t.Errorf("requests_per_unit 0: %+v, want a block", l)
	}
	if l := config.Lookup(d, []entry{{"j", "x"}}); l == nil || l.Rules[0] != sluice.FixedWindow(3, 5*time.Minute) || l.UnitMultiplier != 5 {
		t.Errorf("unit_multiplier with the default algorithm: %+v", l)
	}
	c, err = config.LoadWith(dir, config.Options{Tree: true, MergeDomains: true, DotFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Domains(), ","); got != "a,c" {
		t.Errorf("domains with DotFiles %s, want a,c", got)
	}
}

// TestPeerRuntimeSymlink: the peer's runtime root is usually a symbolic link swapped to a new
// directory ("current"): the tree below a linked directory is read, and the swap is a reload.
func TestPeerRuntimeSymlink(t *testing.T) {
	base := t.TempDir()
	for _, limit := range []string{"1", "2"} {
		d := filepath.Join(base, "v"+limit, "ratelimit", "config")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		body := "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: " + limit + "}\n"
		if err := os.WriteFile(filepath.Join(d, "a.yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	current := filepath.Join(base, "current")
	if err := os.Symlink(filepath.Join(base, "v1"), current); err != nil {
		t.Fatal(err)
	}
	linkedConfig := filepath.Join(base, "config") // the app directory itself a link
	if err := os.Symlink(filepath.Join(current, "ratelimit", "config"), linkedConfig); err != nil {
		t.Fatal(err)
	}
	w, err := config.NewWatcherWith(linkedConfig, config.Options{Tree: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := config.Lookup(w.Config().Domain("a"), []entry{{"k", "x"}}); l == nil || l.RequestsPerUnit != 1 {
		t.Fatalf("before the swap: %+v", l)
	}
	if files := w.Config().Files(); len(files) != 1 || files[0] != filepath.Join(linkedConfig, "a.yaml") {
		t.Errorf("files %v, named under the directory as given", files)
	}
	tmp := filepath.Join(base, "current.tmp")
	if err := os.Symlink(filepath.Join(base, "v2"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, current); err != nil { // the atomic swap
		t.Fatal(err)
	}
	if ok, err := w.Reload(); !ok || err != nil {
		t.Fatalf("reload after the swap: %v %v", ok, err)
	}
	if l := config.Lookup(w.Config().Domain("a"), []entry{{"k", "x"}}); l == nil || l.RequestsPerUnit != 2 {
		t.Errorf("after the swap: %+v", l)
	}
}
