package xds_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/xds"
)

// TestLoadDump: a snapshot dumped as an xDS DiscoveryResponse in JSON (protojson, "@type"
// on each resource), as a YAML list, or as one resource compiles to the rules the same YAML
// files give.
func TestLoadDump(t *testing.T) {
	var anys []*anypb.Any
	for _, r := range []*rlsconf.RateLimitConfig{apiDomain, llmDomain} {
		a, err := anypb.New(r)
		if err != nil {
			t.Fatal(err)
		}
		anys = append(anys, a)
	}
	resp, err := protojson.Marshal(&discovery.DiscoveryResponse{VersionInfo: "7", TypeUrl: xds.TypeURL, Resources: anys, Nonce: "n"})
	if err != nil {
		t.Fatal(err)
	}
	yamlList := `
- name: api-routes
  domain: api
  descriptors:
    - {key: user, rate_limit: {unit: MINUTE, requests_per_unit: 3}}
    - key: path
      value: /login
      rate_limit: {unit: HOUR, requests_per_unit: 1, name: login}
      descriptors:
        - {key: ip, rate_limit: {unit: SECOND, requests_per_unit: 2}}
    - {key: free, rate_limit: {unlimited: true}}
    - {key: shadow, shadow_mode: true, rate_limit: {unit: DAY, requests_per_unit: 1}}
- name: llm-tokens
  domain: llm
  descriptors:
    - {key: model, value: big, rate_limit: {unit: MINUTE, requests_per_unit: 2}}
    - {key: blocked, rate_limit: {unit: SECOND, requests_per_unit: 0}}
`
	want := dump(fileRules(t))
	slices.Sort(want)
	for name, data := range map[string]string{"discovery-response.json": string(resp), "list.yaml": yamlList} {
		c, err := xds.LoadDump(name, []byte(data), config.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := dump(c)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", name, got, want)
		}
	}
	one, err := protojson.Marshal(llmDomain)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := xds.LoadDump("one.json", one, config.Options{}); err != nil || !slices.Equal(c.Domains(), []string{"llm"}) {
		t.Errorf("one resource: %v, %v", c, err)
	}
}

// TestLoadDumpErrors: every problem of a dump is reported, naming the file and the resource
// or the field.
func TestLoadDumpErrors(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{``, "empty"},
		{`"text"`, "want a RateLimitConfig"},
		{`{"resources": 3}`, "resources: want a list"},
		{`[{"domain": "d", "bogus": 1}]`, `resources[0]: `},
		{`[{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "domain": "d"}]`, "@type"},
		{`[{"name": "n", "domain": "d", "descriptors": [{"key": "k", "rate_limit": {"requests_per_unit": 1}}]}]`, "xds:n: descriptors[0].rate_limit.unit"},
		{`[{"name": "a", "domain": "d"}, {"name": "b", "domain": "d"}]`, `duplicate domain "d"`},
		{`[1, {"domain": "d", "descriptors": [{"key": "k", "rate_limit": {"unit": "FORTNIGHT"}}]}]`, "resources[1]"},
	} {
		_, err := xds.LoadDump("dump.json", []byte(c.data), config.Options{})
		if err == nil || !errors.Is(err, xds.ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "dump.json") {
			t.Errorf("%s: error %v, want ErrInvalid naming %q", c.data, err, c.want)
		}
	}
}
