package main

import (
	"context"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// The test cases of envoyproxy/ratelimit (test/config/config_test.go, test/service/
// ratelimit_test.go, test/integration/integration_test.go, README examples) replayed against
// sluice serve over gRPC and /json, on memory and on Redis. The peer's YAML fixtures are
// copied under testdata/envoyproxy-ratelimit (README.md there names the source); each case
// names the peer's test it comes from. Where Sluice differs on purpose, the case tests
// Sluice's answer and its comment gives the peer's (docs/OPERATIONS.md, "Differences from
// envoyproxy/ratelimit").

// TestPeerBasicConfig ports TestBasicConfig and TestConfigLimitOverride (test/config) and the
// service tests of unlimited, empty and unmatched descriptors, on basic_config.yaml.
func TestPeerBasicConfig(t *testing.T) {
	peerStores(t, func(t *testing.T, store []string) {
		forTransports(t, func(t *testing.T, tr string) {
			s := servePeer(t, store, "--config", peerFixture("basic_config.yaml"))
			d := func(kv ...string) []string { return kv }
			r := func(descs ...[]string) *rlsvReq { return rlReq("test-domain", 0, descs...) }
			override := r(d("key1", "value1", "subkey1", "something"))
			override.Descriptors[0].Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 42, Unit: typev3.RateLimitUnit_MINUTE}
			block := r(d("key2", "blocked"))
			block.Descriptors[0].Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 0, Unit: typev3.RateLimitUnit_SECOND}
			runPeerCases(t, s, tr, []peerCase{
				{"TestBasicConfig: unknown domain: OK, no limit (counted, not an error)", rlReq("foo_domain", 0, d("key1", "value1")), "OK; OK rem=0"},
				{"TestBasicConfig: key1_value1 has no limit of its own", r(d("key1", "value1")), "OK; OK rem=0"},
				{"TestBasicConfig: subkey1 default", r(d("key1", "value1", "subkey1", "something")), "OK; OK 5/SECOND rem=4"},
				{"TestBasicConfig: subkey1_subvalue1 overrides the default", r(d("key1", "value1", "subkey1", "subvalue1")), "OK; OK 10/SECOND rem=9"},
				{"TestBasicConfig: deeper than the config", r(d("key1", "value1", "subkey1", "x", "extra", "y")), "OK; OK rem=0"},
				{"TestBasicConfig: key2 default", r(d("key2", "value1")), "OK; OK 20/MINUTE rem=19"},
				{"TestBasicConfig: key2_value2", r(d("key2", "value2")), "OK; OK 30/MINUTE rem=29"},
				{"TestBasicConfig: key2_value3 has no limit: whitelisted", r(d("key2", "value3")), "OK; OK rem=0"},
				{"TestBasicConfig: key3", r(d("key3", "foo")), "OK; OK 1/HOUR rem=0"},
				{"TestBasicConfig: key4 is named", r(d("key4", "foo")), "OK; OK 1/DAY key4_rate_limit rem=0"},
				{"OVER_LIMIT reports limit_remaining 0", r(d("key4", "foo")), "OVER_LIMIT; OVER_LIMIT 1/DAY key4_rate_limit rem=0"},
				{"TestBasicConfig: key5_value5", r(d("key5", "value5")), "OK; OK 15/DAY rem=14"},
				{"TestBasicConfig: key5_value5.subkey5_subvalue5", r(d("key5", "value5", "subkey5", "subvalue5")), "OK; OK 25/DAY rem=24"},
				{"TestUnlimited: limit_remaining is MaxUint32", r(d("key6", "foo")), "OK; OK rem=4294967295"},
				{"TestBasicConfig: key7 detailed_metric", r(d("key7", "unspecified_value")), "OK; OK 70/MINUTE rem=69"},
				{"a descriptor without entries: OK", r(d()), "OK; OK rem=0"},
				{"an entry without a key matches nothing: OK", r(d("", "x")), "OK; OK rem=0"},
				{"TestConfigLimitOverride: the request's limit replaces the configured one", override, "OK; OK 42/MINUTE rem=41"},
				{"TestConfigLimitOverride: counted under the override", override, "OK; OK 42/MINUTE rem=40"},
				{"a limit override of 0 requests blocks", block, "OVER_LIMIT; OVER_LIMIT 0/SECOND rem=0"},
				{"request hits_addend", rlReq("test-domain", 3, d("key2", "hits")), "OK; OK 20/MINUTE rem=17"},
				{"descriptor hits_addend 0 checks without counting", hitsOf(d("key2", "hits"), 0), "OK; OK 20/MINUTE rem=17"},
				{"descriptor hits_addend beats the request's", func() *rlsvReq { q := hitsOf(d("key2", "hits"), 2); q.HitsAddend = 9; return q }(), "OK; OK 20/MINUTE rem=15"},
				{"descriptor hits_addend at its maximum: over the limit", hitsOf(d("key2", "hits"), math.MaxUint64), "OVER_LIMIT; OVER_LIMIT 20/MINUTE rem=0"},
				{"several descriptors, one unlimited, one unmatched", r(d("key3", "bar"), d("key6", "x"), d("nope", "x")),
					"OK; OK 1/HOUR rem=0; OK rem=4294967295; OK rem=0"},
			})
			s.checkSeries(t,
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="key1_value1",key2="subkey1"} 1`,
				`ratelimit_service_rate_limit_within_limit{domain="test-domain",key1="key1_value1",key2="subkey1_subvalue1"} 1`,
				`ratelimit_service_rate_limit_over_limit{domain="test-domain",key1="key4",key2=""} 1`,
				`ratelimit_service_rate_limit_near_limit{domain="test-domain",key1="key4",key2=""} 1`,
				// detailed_metric: the request's value is in the key, as the peer's test expects.
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="key7_unspecified_value",key2=""} 1`,
				// Deliberate difference: the peer names override series by the request's
				// values (test-domain.key1_value1.subkey1_something); Sluice's stay bounded.
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="override",key2=""} 3`,
				// hits_addend at its maximum counts as the largest cost Sluice takes, 1e9+1.
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="key2",key2=""} 1.000000007e+09`,
				`sluice_unknown_domain_requests_total 1`,
				`ratelimit_service_config_load_success 1`,
			)
		})
	})
}

type rlsvReq = rlsv3.RateLimitRequest

// TestPeerWildcards ports TestWildcardConfig (test/config) on wildcard.yaml: '*' anywhere in
// a value and several times, an exact value first, each matching value its own counter.
func TestPeerWildcards(t *testing.T) {
	peerStores(t, func(t *testing.T, store []string) {
		forTransports(t, func(t *testing.T, tr string) {
			s := servePeer(t, store, "--config", peerFixture("wildcard.yaml"))
			q := func(kv ...string) *rlsvReq { return rlReq("test-domain", 0, kv) }
			runPeerCases(t, s, tr, []peerCase{
				{"a value-less key matches any value", q("noVal", "foo1"), "OK; OK 20/MINUTE rem=19"},
				{"a trailing wildcard", q("wild", "foo1"), "OK; OK 20/MINUTE rem=19"},
				{"each matching value counts on its own", q("wild", "foo2"), "OK; OK 20/MINUTE rem=19"},
				{"a nested wildcard", q("nestedWild", "val1", "wild", "goo2"), "OK; OK 20/MINUTE rem=19"},
				{"no match", q("wild", "bar"), "OK; OK rem=0"},
				{"an exact value does not match as a prefix", q("noWild", "foo1"), "OK; OK rem=0"},
				{"a middle wildcard", q("midWild", "barab"), "OK; OK 20/MINUTE rem=19"},
				{"a middle wildcard, longer", q("midWild", "bar123b"), "OK; OK 20/MINUTE rem=19"},
				{"a middle wildcard matching nothing", q("midWild", "barb"), "OK; OK 20/MINUTE rem=19"},
				{"a middle wildcard needs the suffix", q("midWild", "bara"), "OK; OK rem=0"},
				{"a middle wildcard needs the prefix", q("midWild", "xbarb"), "OK; OK rem=0"},
				{"several wildcards", q("multiWild", "foo123bar456baz"), "OK; OK 10/MINUTE rem=9"},
				{"several wildcards matching nothing", q("multiWild", "foobarbaz"), "OK; OK 10/MINUTE rem=9"},
				{"several wildcards need every part", q("multiWild", "foo123baz"), "OK; OK rem=0"},
				{"several wildcards need the prefix", q("multiWild", "bar456baz"), "OK; OK rem=0"},
			})
			s.checkSeries(t,
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="wild_foo*",key2=""} 2`,
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="nestedWild_val1",key2="wild_goo*"} 1`,
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="midWild_bar*b",key2=""} 3`,
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="multiWild_foo*bar*baz",key2=""} 2`,
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="noVal",key2=""} 1`,
			)
		})
	})
}

// TestPeerShareThreshold ports TestShareThreshold (test/config and test/integration) on
// share_threshold.yaml: every value matching a share_threshold wildcard counts on one counter.
func TestPeerShareThreshold(t *testing.T) {
	peerStores(t, func(t *testing.T, store []string) {
		forTransports(t, func(t *testing.T, tr string) {
			s := servePeer(t, store, "--config", peerFixture("share_threshold.yaml"))
			q := func(hits uint32, kv ...string) *rlsvReq { return rlReq("test-domain", hits, kv) }
			runPeerCases(t, s, tr, []peerCase{
				{"files/* shares", q(60, "files", "files/a.pdf"), "OK; OK 100/MINUTE rem=40"},
				{"files/* shares: another value", q(40, "files", "files/b.csv"), "OK; OK 100/MINUTE rem=0"},
				{"files/* shares: a third is over", q(1, "files", "files/c.txt"), "OVER_LIMIT; OVER_LIMIT 100/MINUTE rem=0"},
				{"nested share_threshold", q(1, "nested", "parent", "files", "nested/x"), "OK; OK 200/MINUTE rem=199"},
				{"nested share_threshold: shared", q(1, "nested", "parent", "files", "nested/y"), "OK; OK 200/MINUTE rem=198"},
				{"one key at two levels, both shared", q(1, "files", "top/a", "files", "nested/b"), "OK; OK 300/MINUTE rem=299"},
				{"one key at two levels, both shared: again", q(1, "files", "top/c", "files", "nested/d"), "OK; OK 300/MINUTE rem=298"},
				{"shared parent, unshared child: the child's values count apart", q(1, "path", "path/1", "file", "file/1", "type", "t"), "OK; OK 120/MINUTE rem=119"},
				{"shared parent, unshared child: another child value", q(1, "path", "path/2", "file", "file/2", "type", "t"), "OK; OK 120/MINUTE rem=119"},
				{"two shared levels", q(1, "user", "user/1", "resource", "res/1", "action", "read"), "OK; OK 150/MINUTE rem=149"},
				{"two shared levels: shared", q(1, "user", "user/2", "resource", "res/9", "action", "read"), "OK; OK 150/MINUTE rem=148"},
				{"an exact value beats a shared wildcard", q(1, "file", "test1"), "OK; OK 50/MINUTE rem=49"},
				{"the shared wildcard", q(1, "file", "test2"), "OK; OK 100/MINUTE rem=99"},
				{"the shared wildcard: shared", q(1, "file", "test3"), "OK; OK 100/MINUTE rem=98"},
				{"a shared middle wildcard", q(1, "midpath", "/api/v1"), "OK; OK 100/MINUTE rem=99"},
				{"a shared middle wildcard: shared", q(1, "midpath", "/apiXv1"), "OK; OK 100/MINUTE rem=98"},
				{"shared several wildcards", q(1, "multiroute", "svc1ep2rpc"), "OK; OK 50/MINUTE rem=49"},
				{"shared several wildcards: shared", q(1, "multiroute", "svcAepBrpc"), "OK; OK 50/MINUTE rem=48"},
				{"shared nested middle wildcards", q(1, "tenant", "t1prod", "resource", "resAv2"), "OK; OK 60/MINUTE rem=59"},
				{"shared nested middle wildcards: shared", q(1, "tenant", "t2prod", "resource", "resBv2"), "OK; OK 60/MINUTE rem=58"},
				{"share_threshold with detailed_metric", q(1, "service", "svc/a", "endpoint", "e1"), "OK; OK 80/MINUTE rem=79"},
			})
			s.checkSeries(t,
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="files_files/*",key2=""} 101`,
				`ratelimit_service_rate_limit_over_limit{domain="test-domain",key1="files_files/*",key2=""} 1`,
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="files_top/*",key2="files_nested/*"} 2`,
				// detailed_metric with share_threshold keeps the pattern and the value.
				`ratelimit_service_rate_limit_total_hits{domain="test-domain",key1="service_svc/*",key2="endpoint_e1"} 1`,
			)
		})
	})
}

// TestPeerShadowMode ports TestShadowModeConfig (test/config), TestRuleShadowMode,
// TestMixedRuleShadowMode and TestServiceGlobalShadowMode (test/service).
func TestPeerShadowMode(t *testing.T) {
	peerStores(t, func(t *testing.T, store []string) {
		s := servePeer(t, store, "--config", peerFixture("shadowmode_config.yaml"))
		q := func(hits uint32, descs ...[]string) *rlsvReq { return rlReq("test-domain", hits, descs...) }
		runPeerCases(t, s, "grpc", []peerCase{
			{"TestRuleShadowMode: over a shadow limit answers OK", q(25, []string{"key2", "v"}), "OK; OK 20/MINUTE rem=0"},
			// Deliberate difference (denied hits are not counted, envoyproxy/ratelimit #427): the
			// 25 denied hits above consumed nothing, so key2 "v" is within its limit here; the
			// peer counted them and answers "OK 20/MINUTE rem=0" (over, in shadow mode).
			{"TestMixedRuleShadowMode: a shadow limit, another within", q(1, []string{"key2", "v"}, []string{"key2", "value2"}), "OK; OK 20/MINUTE rem=19; OK 30/MINUTE rem=29"},
			{"TestMixedRuleShadowMode: a limit that is not in shadow mode still denies", q(30, []string{"key2", "v"}, []string{"key2", "value2"}), "OVER_LIMIT; OK 20/MINUTE rem=0; OVER_LIMIT 30/MINUTE rem=0"},
			{"a nested shadow limit", q(11, []string{"key1", "value1", "subkey1", "subvalue1"}), "OK; OK 10/SECOND rem=0"},
		})
		// The hits over the limit count in shadow_mode and over_limit, as the peer counts them
		// from the counts before and after: 25 - 20, then 1 + 30 - 20 (the peer, which had
		// counted the 25 denied hits, has 5 + 30).
		s.checkSeries(t,
			`ratelimit_service_rate_limit_shadow_mode{domain="test-domain",key1="key2",key2=""} 16`,
			`ratelimit_service_rate_limit_over_limit{domain="test-domain",key1="key2",key2=""} 16`,
		)
		g := servePeer(t, store, "--config", peerFixture("shadowmode_config.yaml"), "--shadow-mode")
		runPeerCases(t, g, "json", []peerCase{
			{"TestServiceGlobalShadowMode: OK overall, the status still says OVER_LIMIT", q(31, []string{"key2", "value2"}), "OK; OVER_LIMIT 30/MINUTE rem=0"},
		})
		g.checkSeries(t, `ratelimit_service_global_shadow_mode 1`)
	})
}

// quotaRules are quota-mode descriptors (the peer's service tests of quota mode build them
// with mocks; README "Quota Mode").
const quotaRules = `domain: quota
descriptors:
  - key: q1
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: plain
    rate_limit: {unit: hour, requests_per_unit: 1}
`

// TestPeerQuotaMode ports TestServicePerDescriptorQuotaMode, TestServiceQuotaModeOnlyAllOverTheLimit,
// TestServiceQuotaModeOnlySomeOverTheLimit, TestServiceMixedPerDescriptorModes and
// TestServiceGlobalQuotaMode (test/service).
func TestPeerQuotaMode(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "quota.yaml")
	if err := os.WriteFile(rules, []byte(quotaRules), 0o644); err != nil {
		t.Fatal(err)
	}
	peerStores(t, func(t *testing.T, store []string) {
		s := servePeer(t, store, "--config", rules)
		q := func(descs ...[]string) *rlsvReq { return rlReq("quota", 0, descs...) }
		a, b := []string{"q1", "a"}, []string{"q2", "a"}
		runPeerCases(t, s, "grpc", []peerCase{
			{"within every limit", q(a), "OK; OK 1/HOUR rem=0"},
			{"only some quota descriptors over: OK", q(a, b), "OK; OVER_LIMIT 1/HOUR rem=0; OK 1/HOUR rem=0"},
			{"every quota descriptor over: OVER_LIMIT", q(a, b), "OVER_LIMIT; OVER_LIMIT 1/HOUR rem=0; OVER_LIMIT 1/HOUR rem=0"},
			{"a plain descriptor", q([]string{"plain", "x"}), "OK; OK 1/HOUR rem=0"},
			{"a plain descriptor over denies whatever the quota ones say", q([]string{"q1", "b"}, []string{"plain", "x"}),
				"OVER_LIMIT; OK 1/HOUR rem=0; OVER_LIMIT 1/HOUR rem=0"},
		})
		g := servePeer(t, store, "--config", rules, "--quota-mode")
		runPeerCases(t, g, "grpc", []peerCase{
			{"TestServiceGlobalQuotaMode: one over, one within: OK", q([]string{"plain", "g"}), "OK; OK 1/HOUR rem=0"},
			{"TestServiceGlobalQuotaMode: one over, one within", q([]string{"plain", "g"}, []string{"plain", "h"}), "OK; OVER_LIMIT 1/HOUR rem=0; OK 1/HOUR rem=0"},
		})
	})
}

// TestPeerMergeDomains ports TestDomainMerge and TestDuplicateKeyDomainMerge (test/config):
// MERGE_DOMAIN_CONFIG lets two files define one domain.
func TestPeerMergeDomains(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"merge_domain_key1.yaml", "merge_domain_key2.yaml"} {
		b, err := os.ReadFile(peerFixture(f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := servePeer(t, nil, "--config", dir, "--merge-domains")
	runPeerCases(t, s, "grpc", []peerCase{
		{"TestDomainMerge: key1_value1 from the first file", rlReq("test-domain", 0, []string{"key1", "value1"}), "OK; OK 10/MINUTE rem=9"},
		{"TestDomainMerge: key2_value2 from the second", rlReq("test-domain", 0, []string{"key2", "value2"}), "OK; OK 20/MINUTE rem=19"},
	})
	var out, errOut strings.Builder
	if code := run([]string{"check-config", dir}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), `merge_domain_key2.yaml:2: domain: duplicate domain "test-domain"`) {
		t.Errorf("TestDuplicateDomain: without merging, exit %d: %s", code, errOut.String())
	}
}

// TestPeerBadConfigs ports the peer's error cases of test/config: where it refuses a file,
// check-config refuses it too, naming the file, the line and the field.
func TestPeerBadConfigs(t *testing.T) {
	for file, want := range map[string]string{
		"bad_limit_unit.yaml":      `bad_limit_unit.yaml:6: descriptors[0].rate_limit.unit: unknown unit "foo"`,
		"bad_yaml.yaml":            `bad_yaml.yaml:2:`,
		"duplicate_key.yaml":       `duplicate_key.yaml:6: descriptors[1]: duplicate descriptor "test-domain.key1_value1"`,
		"empty_domain.yaml":        `empty_domain.yaml:1: domain: empty`,
		"empty_key.yaml":           `empty_key.yaml:3: descriptors[0].key: empty`,
		"misspelled_key.yaml":      `misspelled_key.yaml:5: descriptors[0]: unknown field "ratelimit"`,
		"misspelled_key2.yaml":     `misspelled_key2.yaml:7: descriptors[0].rate_limit: unknown field "requestsperunit"`,
		"non_map_list.yaml":        `non_map_list.yaml:3: descriptors[0]: want a mapping`,
		"non_string_key.yaml":      `non_string_key.yaml:1: unknown field "0.25"`,
		"replaces_empty.yaml":      `replaces_empty.yaml:8: descriptors[0].descriptors[0].rate_limit.replaces[0].name: empty`,
		"replaces_self.yaml":       `replaces_self.yaml:8: descriptors[0].descriptors[0].rate_limit.replaces[0].name: a limit cannot replace itself`,
		"unlimited_with_unit.yaml": `unlimited_with_unit.yaml:5: descriptors[0].rate_limit.unlimited: should not specify unit`,
	} {
		var out, errOut strings.Builder
		if code := run([]string{"check-config", peerFixture(file)}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), want) {
			t.Errorf("%s: exit %d, %q does not contain %q", file, code, errOut.String(), want)
		}
	}
	for _, file := range []string{"basic_config.yaml", "wildcard.yaml", "share_threshold.yaml", "metadata.yaml", "shadowmode_config.yaml"} {
		var out, errOut strings.Builder
		if code := run([]string{"check-config", peerFixture(file)}, &out, &errOut); code != 0 {
			t.Errorf("%s: exit %d: %s", file, code, errOut.String())
		}
	}
}

// TestPeerServiceEndpoints ports TestServiceHealthStatus (test/service, test/server) and the
// peer's /healthcheck, /rlconfig, response headers (TestServiceWithCustomRatelimitHeaders)
// and error answers (TestEmptyDomain, TestEmptyDescriptors).
func TestPeerServiceEndpoints(t *testing.T) {
	s := servePeer(t, nil, "--config", peerFixture("basic_config.yaml"), "--response-headers",
		"--response-header-names", "A-Limit,A-Remaining,A-Reset", "--debug-addr", "127.0.0.1:0")
	for _, name := range []string{"", "ratelimit"} {
		resp, err := healthpb.NewHealthClient(s.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("gRPC health %q: %v %v", name, resp, err)
		}
	}
	if code, body := s.get(t, s.httpAddr, "/healthcheck"); code != http.StatusOK || body != "OK" {
		t.Errorf("/healthcheck: %d %q", code, body)
	}
	for _, addr := range []string{s.httpAddr, s.debugAddr} {
		if code, body := s.get(t, addr, "/rlconfig"); code != http.StatusOK ||
			!strings.Contains(body, "test-domain.key2: unit=MINUTE requests_per_unit=20, shadow_mode: false, quota_mode: false\n") ||
			!strings.Contains(body, "test-domain.key6: unit=UNKNOWN requests_per_unit=0") {
			t.Errorf("%s/rlconfig: %d %q", addr, code, body)
		}
	}
	resp, err := s.client.ShouldRateLimit(context.Background(), rlReq("test-domain", 0, []string{"key2", "h"}, []string{"key3", "h"}))
	if err != nil {
		t.Fatal(err)
	}
	var hs []string
	for _, h := range resp.ResponseHeadersToAdd {
		hs = append(hs, h.Key+"="+h.Value)
	}
	// The descriptor closest to its limit: key3 (1/hour, 0 left).
	if got := strings.Join(hs, " "); !strings.HasPrefix(got, "A-Limit=1 A-Remaining=0 A-Reset=") {
		t.Errorf("TestServiceWithCustomRatelimitHeaders: %s", got)
	}
	// Deliberate difference: the peer answers these with an error of code UNKNOWN; Sluice
	// with INVALID_ARGUMENT, naming the field.
	for _, req := range []*rlsvReq{rlReq("", 0, []string{"key2", "x"}), rlReq("test-domain", 0)} {
		if _, err := s.client.ShouldRateLimit(context.Background(), req); err == nil || !strings.Contains(err.Error(), "InvalidArgument") {
			t.Errorf("TestEmptyDomain/TestEmptyDescriptors: %v", err)
		}
	}
	if code, _ := s.post(t, "/json", "not json"); code != http.StatusBadRequest {
		t.Errorf("/json garbage: %d, want 400", code)
	}
}

// TestPeerStoreDown: deliberate difference — with its store down, Sluice answers gRPC
// UNAVAILABLE and /json HTTP 503; the peer answers gRPC UNKNOWN (a recovered RedisError) and
// /json 400. Both count in ratelimit_service_should_rate_limit_error{err_type="redis_error"}.
func TestPeerStoreDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	_ = l.Close() // nothing listens there
	s := servePeer(t, []string{"--store", "redis://" + dead + "/0?dial_timeout=20ms", "--store-timeout", "100ms"},
		"--config", peerFixture("basic_config.yaml"))
	req := rlReq("test-domain", 0, []string{"key2", "x"})
	if _, err := s.client.ShouldRateLimit(context.Background(), req); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC: %v, want UNAVAILABLE", err)
	}
	body, _ := protojson.Marshal(req)
	if code, text := s.post(t, "/json", string(body)); code != http.StatusServiceUnavailable {
		t.Errorf("/json: %d %q, want 503", code, text)
	}
	s.checkSeries(t, `ratelimit_service_should_rate_limit_error{err_type="redis_error"} 2`)
}

// peerReadmeExamples are the rules of envoyproxy/ratelimit's README examples 2, 3, 5, 6 and 7.
var peerReadmeExamples = map[string]string{
	"example2.yaml": `domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: to_number
    rate_limit: {unit: day, requests_per_unit: 100}
`,
	"example3.yaml": `domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
`,
	"example5.yaml": `domain: internal
descriptors:
  - key: ldap
    rate_limit: {unlimited: true}
  - key: azure
    rate_limit: {unit: minute, requests_per_unit: 100}
`,
	"example6.yaml": `domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit: {requests_per_unit: 10, unit: second}
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit: {requests_per_unit: 20, unit: second}
`,
	"example7.yaml": `domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit: {name: specific_limit, requests_per_unit: 5, unit: second}
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces: [{name: specific_limit}]
          requests_per_unit: 10
          unit: second
`,
}

// TestPeerReadmeExamples replays the README's examples 2, 3, 5, 6 and 7 (4, 8, 9, 10 and
// 11 are in config/peer_test.go and TestPeerShareThreshold).
func TestPeerReadmeExamples(t *testing.T) {
	dir := t.TempDir()
	for name, body := range peerReadmeExamples {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	peerStores(t, func(t *testing.T, store []string) {
		s := servePeer(t, store, "--config", dir)
		q := func(domain string, hits uint32, descs ...[]string) *rlsvReq { return rlReq(domain, hits, descs...) }
		marketing, number := []string{"message_type", "marketing", "to_number", "2061111111"}, []string{"to_number", "2061111111"}
		runPeerCases(t, s, "grpc", []peerCase{
			{"example 2: both rules apply, logical OR", q("messaging", 1, marketing, number), "OK; OK 5/DAY rem=4; OK 100/DAY rem=99"},
			{"example 2: the marketing limit is reached", q("messaging", 4, marketing, number), "OK; OK 5/DAY rem=0; OK 100/DAY rem=95"},
			{"example 2: over the marketing limit", q("messaging", 1, marketing, number), "OVER_LIMIT; OVER_LIMIT 5/DAY rem=0; OK 100/DAY rem=95"},
			{"example 2: another number", q("messaging", 1, []string{"to_number", "2062222222"}), "OK; OK 100/DAY rem=99"},
			{"example 3: any address", q("edge_proxy_per_ip", 1, []string{"remote_address", "50.0.0.1"}), "OK; OK 10/SECOND rem=9"},
			{"example 3: the blocked address", q("edge_proxy_per_ip", 1, []string{"remote_address", "50.0.0.5"}), "OVER_LIMIT; OVER_LIMIT 0/SECOND rem=0"},
			{"example 5: unlimited", q("internal", 1, []string{"ldap", "x"}), "OK; OK rem=4294967295"},
			{"example 5: limited", q("internal", 1, []string{"azure", "x"}), "OK; OK 100/MINUTE rem=99"},
			{"example 6: user-a in shadow mode is never limited", q("example6", 11, []string{"service", "auth-service", "user", "user-a"}), "OK; OK 10/SECOND rem=0"},
			{"example 6: user-b is", q("example6", 21, []string{"service", "auth-service", "user", "user-b"}), "OVER_LIMIT; OVER_LIMIT 20/SECOND rem=0"},
			{"example 7: each alone", q("example7", 1, []string{"key_1", "value_1", "user", "bkthomps"}), "OK; OK 5/SECOND specific_limit rem=4"},
			{"example 7: both: the replaced limit does not apply", q("example7", 1, []string{"key_1", "value_1", "user", "bkthomps"}, []string{"key_2", "value_2", "user", "bkthomps"}),
				"OK; OK rem=0; OK 10/SECOND rem=9"},
		})
	})
}
