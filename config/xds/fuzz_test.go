package xds_test

import (
	"errors"
	"strings"
	"testing"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/xds"
)

// FuzzSnapshot: any bytes as a RateLimitConfig resource of a snapshot compile or are
// refused without a panic; a refusal wraps ErrInvalid (and config.ErrInvalid when the rules
// compiler refused them) and names the resource; compiled rules have the resource's domain
// only.
func FuzzSnapshot(f *testing.F) {
	for _, seed := range []*rlsconf.RateLimitConfig{apiDomain, llmDomain,
		{Name: "n", Domain: "d", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "k", RateLimit: &rlsconf.RateLimitPolicy{Unlimited: true, Unit: rlsconf.RateLimitUnit_SECOND}}}},
		{Name: "n", Domain: "", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "", Value: "*"}}},
	} {
		b, err := proto.Marshal(seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res := &rlsconf.RateLimitConfig{}
		if proto.Unmarshal(data, res) != nil {
			return
		}
		res.Name = "fuzzed"
		a, err := anypb.New(res)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := xds.Compile(config.Options{}, []*anypb.Any{a})
		if err != nil {
			if !errors.Is(err, xds.ErrInvalid) || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("refusal does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), "xds:fuzzed") {
				t.Fatalf("refusal does not name the resource: %v", err)
			}
			return
		}
		if d := cfg.Domains(); len(d) != 1 || d[0] != res.GetDomain() {
			t.Fatalf("domains %q, want [%q]", d, res.GetDomain())
		}
	})
}
