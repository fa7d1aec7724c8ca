package config_test

import (
	"errors"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/quota/alloc"
)

const quotaRules = `domain: envoy
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
quota_buckets:
  - name: login
    bucket_id: {name: login, env: prod}
    requests_per_unit: 100
    unit: minute
    strategy: requests_per_time_unit
    assignment_ttl: 10s
  - bucket_id: {name: "api-*"}
    requests_per_unit: 1000
    period: 10s
    burst: 200
    fairness: proportional
    history: 8
    default_demand: 50
    on_close: release
  - bucket_id: {tenant: ""}
    strategy: deny_all
  - bucket_id: {}
    requests_per_unit: 5
    unit: second
    fairness: static
    static_share: 1
`

func TestQuotaRules(t *testing.T) {
	c, err := config.LoadFS(fstest.MapFS{"rules.yaml": {Data: []byte(quotaRules)}}, "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := c.Domain("envoy")
	if len(d.QuotaRules()) != 4 || len(c.Limits()) != 1 {
		t.Fatalf("%d quota rules, %d limits", len(d.QuotaRules()), len(c.Limits()))
	}
	for _, tc := range []struct {
		bucket map[string]string
		want   string
	}{
		{map[string]string{"name": "login", "env": "prod"}, "login"},
		{map[string]string{"name": "login", "env": "prod", "extra": "x"}, "login"},
		{map[string]string{"name": "login"}, "envoy.quota_buckets[3]"}, // env missing: falls to catch-all
		{map[string]string{"name": "api-v1"}, "envoy.quota_buckets[1]"},
		{map[string]string{"name": "ap"}, "envoy.quota_buckets[3]"},
		{map[string]string{"tenant": "t1"}, "envoy.quota_buckets[2]"},
		{map[string]string{"tenant": ""}, "envoy.quota_buckets[2]"},
	} {
		r := d.Quota(tc.bucket)
		if r == nil || r.Name != tc.want {
			t.Errorf("Quota(%v) = %v, want %s", tc.bucket, r, tc.want)
		}
	}
	login := d.QuotaRules()[0]
	if login.Strategy != config.QuotaRequestsPerTimeUnit || login.Unit != config.UnitMinute ||
		login.Share.Limit != 100 || login.Share.Period != time.Minute || login.Share.TTL != 10*time.Second || login.Burst != 0 && login.Burst != 100 {
		t.Errorf("login rule: %+v", login)
	}
	api := d.QuotaRules()[1]
	if api.Burst != 200 || api.Share.Fairness != alloc.Proportional || api.Share.History != 8 || api.Share.DefaultDemand != 50 || api.Share.Period != 10*time.Second ||
		!api.Share.ReleaseOnLeave || login.Share.ReleaseOnLeave {
		t.Errorf("api rule: %+v", api)
	}
	if d.QuotaRules()[2].Strategy != config.QuotaDenyAll || d.QuotaRules()[3].Share.StaticShare != 1 {
		t.Errorf("rules: %+v %+v", d.QuotaRules()[2], d.QuotaRules()[3])
	}
	b := map[string]string{"name": "api-v1"}
	if n := testing.AllocsPerRun(100, func() { d.Quota(b) }); n != 0 {
		t.Errorf("Quota allocates %v times", n)
	}
}

// TestQuotaInvalidFixtures loads each file of testdata/quota: its problems are named with
// file, line and field.
func TestQuotaInvalidFixtures(t *testing.T) {
	want := map[string][]string{
		"bad_strategy.yaml":            {"bad_strategy.yaml:3: quota_buckets[0].strategy:", `"leaky"`},
		"bad_on_close.yaml":            {"bad_on_close.yaml:3: quota_buckets[0].on_close: want hold or release", `"forget"`},
		"uneven_unit.yaml":             {"uneven_unit.yaml:3: quota_buckets[0].period: requests_per_time_unit needs"},
		"static_without_share.yaml":    {"static_without_share.yaml:3: quota_buckets[0].static_share:"},
		"bad_ttl.yaml":                 {"bad_ttl.yaml:3: quota_buckets[0].assignment_ttl:", `"never"`},
		"ttl_too_short.yaml":           {"ttl_too_short.yaml:3: quota_buckets[0].assignment_ttl: want whole seconds from 1s to 1m", `"1ms"`},
		"ttl_too_long.yaml":            {"ttl_too_long.yaml:3: quota_buckets[0].assignment_ttl: want whole seconds from 1s to 1m", `"1h"`},
		"ttl_fraction.yaml":            {"ttl_fraction.yaml:3: quota_buckets[0].assignment_ttl: want whole seconds", `"1500ms"`},
		"zero_requests.yaml":           {"zero_requests.yaml:3: quota_buckets[0].requests_per_unit: want 1 to"},
		"unknown_field.yaml":           {"unknown_field.yaml:6:", `unknown field "shares"`},
		"blanket_with_limit.yaml":      {"blanket_with_limit.yaml:3: quota_buckets[0].strategy: deny_all takes no"},
		"sub_ms_period.yaml":           {"sub_ms_period.yaml:3: quota_buckets[0].period: must be a whole number of milliseconds"},
		"empty_criticality_key.yaml":   {"empty_criticality_key.yaml:3: quota_buckets[0].criticality_key: empty"},
		"matched_criticality_key.yaml": {"matched_criticality_key.yaml:3: quota_buckets[0].criticality_key:", "also a bucket_id matcher"},
		"blanket_criticality_key.yaml": {"blanket_criticality_key.yaml:3: quota_buckets[0].criticality_key: allow_all"},
		"two_problems.yaml":            {"two_problems.yaml:3: quota_buckets[0].bucket_id.{x}: brace", "two_problems.yaml:3: quota_buckets[0].fairness:"},
	}
	for base, err := range loadFixtures(t, "testdata/quota", want) {
		if !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s: error does not wrap ErrInvalid: %v", base, err)
		}
	}
}

func TestQuotaCriticalityKey(t *testing.T) {
	c, err := config.LoadFS(fstest.MapFS{"rules.yaml": {Data: []byte(`domain: envoy
quota_buckets:
  - bucket_id: {name: api}
    requests_per_unit: 100
    unit: second
    criticality_key: class
  - bucket_id: {name: other}
    requests_per_unit: 100
    unit: second
`)}}, "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	api, other := c.Domain("envoy").QuotaRules()[0], c.Domain("envoy").QuotaRules()[1]
	if api.CriticalityKey != "class" || other.CriticalityKey != "" {
		t.Fatalf("criticality keys %q %q", api.CriticalityKey, other.CriticalityKey)
	}
	for _, tc := range []struct {
		rule   *config.QuotaRule
		bucket map[string]string
		want   sluice.Criticality
		ok     bool
	}{
		{api, map[string]string{"name": "api", "class": "sheddable"}, sluice.Sheddable, true},
		{api, map[string]string{"name": "api", "class": "CRITICAL_PLUS"}, sluice.CriticalPlus, true},
		{api, map[string]string{"name": "api"}, sluice.Critical, true},
		{api, map[string]string{"name": "api", "class": "urgent"}, sluice.Critical, false},
		{other, map[string]string{"name": "other", "class": "sheddable"}, sluice.Critical, true},
	} {
		if got, ok := tc.rule.Class(tc.bucket); got != tc.want || ok != tc.ok {
			t.Errorf("%s.Class(%v) = %v %v, want %v %v", tc.rule.Name, tc.bucket, got, ok, tc.want, tc.ok)
		}
	}
}
