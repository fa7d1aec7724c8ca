package xds

import (
	"errors"
	"fmt"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/sluicehq/sluice/config"
)

// TypeURL is the type URL of the resources a Client subscribes to.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// ErrInvalid is wrapped by every error about a snapshot's content (config.ErrInvalid is
// wrapped too, for problems the rules compiler finds).
var ErrInvalid = errors.New("xds: invalid snapshot")

// Documents converts RateLimitConfig resources to rules documents, one per resource, named
// "xds:<resource name>" in error messages. Nothing is validated here: config.CompileWith
// validates the documents as it does those of rules files.
func Documents(res []*rlsconf.RateLimitConfig) []*config.Document {
	docs := make([]*config.Document, len(res))
	for i, r := range res {
		docs[i] = &config.Document{Domain: r.GetDomain(), Descriptors: descriptors(r.GetDescriptors()), File: "xds:" + r.GetName()}
	}
	return docs
}

func descriptors(pb []*rlsconf.RateLimitDescriptor) []config.Descriptor {
	if len(pb) == 0 {
		return nil
	}
	out := make([]config.Descriptor, len(pb))
	for i, d := range pb {
		out[i] = config.Descriptor{
			Key:            d.GetKey(),
			Value:          d.GetValue(),
			RateLimit:      policy(d.GetRateLimit()),
			Descriptors:    descriptors(d.GetDescriptors()),
			ShadowMode:     d.GetShadowMode(),
			DetailedMetric: d.GetDetailedMetric(),
		}
	}
	return out
}

func policy(pb *rlsconf.RateLimitPolicy) *config.RateLimit {
	if pb == nil {
		return nil
	}
	rl := &config.RateLimit{
		RequestsPerUnit: int64(pb.GetRequestsPerUnit()),
		Unlimited:       pb.GetUnlimited(),
		Name:            pb.GetName(),
	}
	if pb.GetUnit() != rlsconf.RateLimitUnit_UNKNOWN || !pb.GetUnlimited() {
		rl.Unit = pb.GetUnit().String() // UNKNOWN is refused by the compiler, naming the field
	}
	for _, r := range pb.GetReplaces() {
		rl.Replaces = append(rl.Replaces, config.Replace{Name: r.GetName()})
	}
	return rl
}

// Compile decodes the resources of a snapshot and compiles them with o, as config.LoadWith
// compiles rules files. Every problem is reported, joined; a resource of another type or one
// that does not decode is one.
func Compile(o config.Options, resources []*anypb.Any) (*config.Config, error) {
	var errs []error
	res := make([]*rlsconf.RateLimitConfig, 0, len(resources))
	for i, a := range resources {
		if a.GetTypeUrl() != TypeURL {
			errs = append(errs, fmt.Errorf("%w: resources[%d]: type %q, want %s", ErrInvalid, i, a.GetTypeUrl(), TypeURL))
			continue
		}
		r := &rlsconf.RateLimitConfig{}
		if err := anypb.UnmarshalTo(a, r, proto.UnmarshalOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("%w: resources[%d]: %v", ErrInvalid, i, err))
			continue
		}
		res = append(res, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return CompileConfigs(o, res)
}

// CompileConfigs compiles decoded RateLimitConfig resources with o. An empty snapshot is
// valid and has no domain (the xDS server removed every rule): every request is then OK, as
// for an unknown domain.
func CompileConfigs(o config.Options, res []*rlsconf.RateLimitConfig) (*config.Config, error) {
	if len(res) == 0 {
		return &config.Config{}, nil
	}
	cfg, err := config.CompileWith(o, Documents(res)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return cfg, nil
}
