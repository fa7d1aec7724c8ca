package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/examples"
)

type entry struct{ k, v string }

func (e entry) GetKey() string   { return e.k }
func (e entry) GetValue() string { return e.v }

func mustCompile(t *testing.T, yaml string) *config.Config {
	t.Helper()
	doc, err := config.Decode("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const envoyRules = `
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: destination_cluster
    value: mongo
    descriptors:
      - key: source_cluster
        value: client
        rate_limit: {unit: hour, requests_per_unit: 7}
      - key: source_cluster
        rate_limit: {unit: day, requests_per_unit: 3}
  - key: path
    value: /static/*
    rate_limit: {unlimited: true}
  - key: tiered
    rate_limits:
      - {period: 30s, requests_per_unit: 5, algorithm: token_bucket, burst: 10}
      - {unit: week, requests_per_unit: 1000}
`

func TestLookupEnvoySemantics(t *testing.T) {
	c := mustCompile(t, envoyRules)
	d := c.Domain("mongo_cps")
	if d == nil || c.Domain("other") != nil {
		t.Fatalf("domains: %v", c.Domains())
	}
	tests := []struct {
		name    string
		entries []entry
		want    string // FullKey, "" for none
	}{
		{"exact value", []entry{{"database", "users"}}, "mongo_cps.database_users"},
		{"unknown value, no default", []entry{{"database", "other"}}, ""},
		{"value-less key matches any value", []entry{{"remote_address", "10.0.0.1"}}, "mongo_cps.remote_address"},
		{"empty value matches the default", []entry{{"remote_address", ""}}, "mongo_cps.remote_address"},
		{"nested exact", []entry{{"destination_cluster", "mongo"}, {"source_cluster", "client"}}, "mongo_cps.destination_cluster_mongo.source_cluster_client"},
		{"nested default", []entry{{"destination_cluster", "mongo"}, {"source_cluster", "x"}}, "mongo_cps.destination_cluster_mongo.source_cluster"},
		{"parent without limit", []entry{{"destination_cluster", "mongo"}}, ""},
		{"deeper than config", []entry{{"database", "users"}, {"x", "y"}}, ""},
		{"wildcard", []entry{{"path", "/static/app.js"}}, "mongo_cps.path_/static/*"},
		{"wildcard miss", []entry{{"path", "/api"}}, ""},
		{"unknown key", []entry{{"nope", "x"}}, ""},
		{"no entries", nil, ""},
	}
	for _, tt := range tests {
		got := config.Lookup(d, tt.entries)
		name := ""
		if got != nil {
			name = got.FullKey
		}
		if name != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, name, tt.want)
		}
	}
	l := config.Lookup(d, []entry{{"tiered", "a"}})
	want := []sluice.Rule{sluice.TokenBucket(5, 30*time.Second, 10), sluice.Per(1000, 7*24*time.Hour)}
	if len(l.Rules) != 2 || l.Rules[0] != want[0] || l.Rules[1] != want[1] {
		t.Errorf("tiered rules: %v, want %v", l.Rules, want)
	}
	if l.Unit != config.UnitSecond || l.UnitMultiplier != 30 || l.RequestsPerUnit != 5 {
		t.Errorf("tiered unit: %v x%d %d", l.Unit, l.UnitMultiplier, l.RequestsPerUnit)
	}
	if u := config.Lookup(d, []entry{{"path", "/static/x"}}); !u.Unlimited || len(u.Rules) != 0 {
		t.Errorf("unlimited: %+v", u)
	}
	if r := config.Lookup(d, []entry{{"database", "users"}}).Rules[0]; r != sluice.Per(500, time.Second) {
		t.Errorf("default algorithm: %v", r)
	}
	if n := len(c.Limits()); n != 7 {
		t.Errorf("limits: %d, want 7", n)
	}
	for i, l := range c.Limits() {
		if l.Index != i {
			t.Errorf("limit %s index %d at %d", l.FullKey, l.Index, i)
		}
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	c := mustCompile(t, envoyRules)
	d := c.Domain("mongo_cps")
	es := []entry{{"destination_cluster", "mongo"}, {"source_cluster", "x"}}
	if n := testing.AllocsPerRun(100, func() { config.Lookup(d, es) }); n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
}

// TestInvalidFixtures loads each file of testdata: one problem per file, named with file,
// line and field.
func TestInvalidFixtures(t *testing.T) {
	want := map[string][]string{
		"unknown_field.yaml":                    {"unknown_field.yaml:5:", `unknown field "colour"`},
		"unknown_rate_limit_field.yaml":         {"unknown_rate_limit_field.yaml:4:", `unknown field "per"`},
		"empty_domain.yaml":                     {"empty_domain.yaml:1: domain: empty"},
		"empty_key.yaml":                        {"empty_key.yaml:3: descriptors[0].key: empty"},
		"bad_unit.yaml":                         {"bad_unit.yaml:4: descriptors[0].rate_limit.unit:", `"fortnight"`},
		"missing_unit.yaml":                     {"missing_unit.yaml:4: descriptors[0].rate_limit.unit: missing"},
		"unit_and_period.yaml":                  {"unit_and_period.yaml:4: descriptors[0].rate_limit.period: unit and period are exclusive"},
		"bad_period.yaml":                       {"bad_period.yaml:4: descriptors[0].rate_limit.period:", `"soon"`},
		"negative_requests.yaml":                {"negative_requests.yaml:4: descriptors[0].rate_limit.requests_per_unit: must not be negative"},
		"bad_algorithm.yaml":                    {"bad_algorithm.yaml:4: descriptors[0].rate_limit.algorithm:", `"magic"`},
		"burst_on_window.yaml":                  {"burst_on_window.yaml:4: descriptors[0].rate_limit.burst: not used by sliding_window"},
		"unlimited_with_unit.yaml":              {"unlimited_with_unit.yaml:4: descriptors[0].rate_limit.unlimited:"},
		"duplicate_descriptor.yaml":             {"duplicate_descriptor.yaml:6: descriptors[1]:", `duplicate descriptor "d.a_x"`},
		"both_rate_limit_forms.yaml":            {"both_rate_limit_forms.yaml:3: descriptors[0]: rate_limit and rate_limits are exclusive"},
		"replaces_self.yaml":                    {"replaces_self.yaml:5: descriptors[0].rate_limit.replaces[0].name:"},
		"brace_in_key.yaml":                     {"brace_in_key.yaml:3: descriptors[0].key: brace"},
		"wrong_type.yaml":                       {"wrong_type.yaml:4:", "many"},
		"syntax_error.yaml":                     {"syntax_error.yaml:"},
		"two_documents.yaml":                    {"two_documents.yaml:", "more than one YAML document"},
		"empty_file.yaml":                       {"empty_file.yaml: empty file"},
		"share_threshold_without_wildcard.yaml": {"share_threshold_without_wildcard.yaml:3: descriptors[0].share_threshold: needs a wildcard value"},
		"too_many_requests.yaml":                {"too_many_requests.yaml:4: descriptors[0].rate_limit.requests_per_unit: must be at most 1000000000, got 2000000000"},
		"uneven_sub_windows.yaml":               {"uneven_sub_windows.yaml:5: descriptors[0].rate_limits[0].sub_windows: period 1s does not divide into 7 whole-millisecond sub-windows"},
		"bad_telemetry.yaml":                    {`bad_telemetry.yaml:3: descriptors[0].telemetry: want hashed or raw, got "plain"`},
		"many_problems.yaml":                    {"many_problems.yaml:4: descriptors[0].rate_limit.unit:", "many_problems.yaml:6: descriptors[1].rate_limit.requests_per_unit:", "many_problems.yaml:9: descriptors[1].descriptors[0].rate_limit.burst:"},
	}
	for base, err := range loadFixtures(t, "testdata", want) {
		if !errors.Is(err, config.ErrInvalid) && base != "syntax_error.yaml" {
			t.Errorf("%s: error does not wrap ErrInvalid: %v", base, err)
		}
	}
}

// loadFixtures loads every *.yaml file of dir, each of which must fail with an error whose
// text (dir/ left out) contains every string of want[file]; it returns the errors by file.
func loadFixtures(t *testing.T, dir string, want map[string][]string) map[string]error {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) != len(want) {
		t.Errorf("%d fixtures, %d expectations", len(files), len(want))
	}
	errs := make(map[string]error)
	for _, f := range files {
		base := filepath.Base(f)
		_, err := config.Load(f)
		if err == nil {
			t.Errorf("%s: loaded without error", base)
			continue
		}
		errs[base] = err
		msg := strings.ReplaceAll(err.Error(), dir+"/", "")
		for _, w := range want[base] {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q does not contain %q", base, msg, w)
			}
		}
	}
	return errs
}

func TestDirectoryAndDuplicateDomains(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yml", "domain: b\ndescriptors: []\n")
	write(".hidden.yaml", "garbage: [")
	write("notes.txt", "not rules")
	c, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Domains(), ","); got != "a,b" {
		t.Errorf("domains %q", got)
	}
	write("c.yaml", "domain: a\ndescriptors: []\n")
	if _, err := config.Load(dir); err == nil || !strings.Contains(err.Error(), `duplicate domain "a"`) {
		t.Errorf("duplicate domain: %v", err)
	}
	if _, err := config.Load(t.TempDir()); err == nil {
		t.Error("empty directory loaded")
	}
	if _, err := config.Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file loaded")
	}
}

func TestWatcherReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	rules := func(n int) string {
		return "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: " + string(rune('0'+n)) + "}\n"
	}
	if err := os.WriteFile(path, []byte(rules(1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var applied, rejected int
	w, err := config.NewWatcher(path, func(*config.Config) { applied++ }, func(error) { rejected++ })
	if err != nil {
		t.Fatal(err)
	}
	limit := func() int64 {
		return config.Lookup(w.Config().Domain("d"), []entry{{"k", "x"}}).Rules[0].Limit
	}
	if changed, err := w.Reload(); changed || err != nil {
		t.Fatalf("unchanged files: changed=%v err=%v", changed, err)
	}
	os.WriteFile(path, []byte(rules(5)), 0o644)
	if changed, err := w.Reload(); !changed || err != nil || limit() != 5 {
		t.Fatalf("valid change: changed=%v err=%v limit=%d", changed, err, limit())
	}
	os.WriteFile(path, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: eon, requests_per_unit: 1}\n"), 0o644)
	if changed, err := w.Reload(); changed || err == nil || limit() != 5 {
		t.Fatalf("invalid change: changed=%v err=%v limit=%d", changed, err, limit())
	}
	if _, err := w.Reload(); err != nil { // reported once
		t.Errorf("second check of the same invalid files: %v", err)
	}
	os.Remove(path)
	if _, err := w.Reload(); err == nil || limit() != 5 {
		t.Errorf("removed file: err=%v", err)
	}
	os.WriteFile(path, []byte(rules(7)), 0o644)
	if changed, _ := w.Reload(); !changed || limit() != 7 {
		t.Errorf("recovery: limit %d", limit())
	}
	if applied != 2 || rejected != 2 {
		t.Errorf("applied %d rejected %d, want 2 and 2", applied, rejected)
	}
}

func TestExampleConfig(t *testing.T) {
	c, err := config.LoadFS(examples.Config, examples.ConfigDir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Domain("example") == nil {
		t.Fatalf("domains %v", c.Domains())
	}
	// The README's quota client reports the bucket {name: api}: a rule must cover it.
	if r := c.Domain("example").Quota(map[string]string{"name": "api"}); r == nil {
		t.Errorf("no quota rule of the example covers the bucket {name: api}")
	}
	if _, err := config.Load("../examples/config"); err != nil {
		t.Fatal(err)
	}
}

func TestUnitOf(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		u    config.Unit
		mult uint32
	}{
		{time.Second, config.UnitSecond, 1}, {30 * time.Second, config.UnitSecond, 30},
		{2 * time.Hour, config.UnitHour, 2}, {90 * time.Minute, config.UnitMinute, 90},
		{14 * 24 * time.Hour, config.UnitWeek, 2}, {500 * time.Millisecond, config.UnitUnknown, 0},
	} {
		if u, m := config.UnitOf(tt.d); u != tt.u || m != tt.mult {
			t.Errorf("UnitOf(%v) = %v, %d; want %v, %d", tt.d, u, m, tt.u, tt.mult)
		}
	}
}
