package server

import (
	"fmt"
	"strconv"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// invalid returns an INVALID_ARGUMENT error whose message names the field.
func invalid(format string, args ...any) error {
	return status.Error(codes.InvalidArgument, "sluice: "+fmt.Sprintf(format, args...))
}

// quote quotes s for an error message, cut to 64 bytes so a huge value is not echoed.
func quote(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

// validate checks a request's shape before anything else is done: domain and descriptors
// present, descriptor and entry counts bounded, keys and values well formed, store keys not
// too long. An unknown domain is not an error (envoyproxy/ratelimit answers OK with no
// limits, so that Envoy's failure_mode_deny does not deny all traffic): its Domain is nil.
func (s *Server) validate(st *rules, req *rlsv3.RateLimitRequest) (*config.Domain, error) {
	if req.Domain == "" {
		return nil, invalid("domain: empty")
	}
	if err := config.CheckValue(req.Domain); err != nil {
		return nil, invalid("domain %s: %v", quote(req.Domain), err)
	}
	dom := st.cfg.Domain(req.Domain)
	if dom == nil {
		s.unknownDomain(req.Domain)
	}
	n := len(req.Descriptors)
	if n == 0 {
		return nil, invalid("descriptors: empty")
	}
	if n > s.maxDescriptors {
		return nil, invalid("descriptors: %d, more than the maximum of %d", n, s.maxDescriptors)
	}
	for i, d := range req.Descriptors {
		if err := s.validateDescriptor(i, len(req.Domain), d); err != nil {
			return nil, err
		}
	}
	return dom, nil
}

func (s *Server) validateDescriptor(i, domainLen int, d *rlcommon.RateLimitDescriptor) error {
	if d == nil {
		return invalid("descriptors[%d]: null", i)
	}
	if len(d.Entries) > s.maxDescEntries {
		return invalid("descriptors[%d].entries: %d, more than the maximum of %d", i, len(d.Entries), s.maxDescEntries)
	}
	size := keyLen(domainLen, d.Entries)
	if size > s.maxKeyLen {
		return invalid("descriptors[%d]: its store key would be %d bytes, more than the maximum of %d", i, size, s.maxKeyLen)
	}
	for j, e := range d.Entries {
		if e == nil {
			return invalid("descriptors[%d].entries[%d]: null", i, j)
		}
		if e.Key == "" && d.Limit != nil {
			return invalid("descriptors[%d].entries[%d].key: empty", i, j)
		}
		if err := config.CheckKey(e.Key); err != nil {
			return invalid("descriptors[%d].entries[%d].key %s: %v", i, j, quote(e.Key), err)
		}
		if err := config.CheckValue(e.Value); err != nil {
			return invalid("descriptors[%d].entries[%d].value %s: %v", i, j, quote(e.Value), err)
		}
	}
	if l := d.Limit; l != nil {
		if len(d.Entries) == 0 {
			return invalid("descriptors[%d].entries: empty (a limit override needs entries to count under)", i)
		}
		return s.checkOverride(i, l)
	}
	return nil
}

// checkOverride checks the limit override of descriptor i: allowed by Config.RequestRules,
// valid, and within the ceilings on rules supplied by requests.
func (s *Server) checkOverride(i int, l *rlcommon.RateLimitDescriptor_RateLimitOverride) error {
	field := fmt.Sprintf("descriptors[%d].limit", i)
	if err := s.requestRules.supplied(field); err != nil {
		return err
	}
	r, err := overrideRule(l, s.defaultAlgorithm)
	if err != nil {
		return invalid("%s: %v", field, err)
	}
	if r.Limit == 0 {
		return nil // a block
	}
	return s.requestRules.check(field, field+".unit", r)
}

// overrideRule is the rule of a limit supplied by the request: requests_per_unit per unit x
// unit_multiplier, of the default algorithm. requests_per_unit 0 blocks (as in
// envoyproxy/ratelimit): the rule returned has Limit 0 and is never sent to a store.
func overrideRule(l *rlcommon.RateLimitDescriptor_RateLimitOverride, algo sluice.Algorithm) (sluice.Rule, error) {
	unit := config.Unit(l.Unit).Duration()
	if unit == 0 {
		return sluice.Rule{}, fmt.Errorf("unit: unknown value %d", l.Unit)
	}
	mult := uint32(1)
	if l.UnitMultiplier != nil && l.UnitMultiplier.Value > 0 {
		mult = l.UnitMultiplier.Value
	}
	if time.Duration(mult) > sluice.MaxPeriod/unit {
		return sluice.Rule{}, fmt.Errorf("unit_multiplier: %d %s is longer than %v", mult, config.Unit(l.Unit), sluice.MaxPeriod)
	}
	r := sluice.Rule{Algorithm: algo, Limit: int64(l.RequestsPerUnit), Period: unit * time.Duration(mult)}
	if r.Limit == 0 {
		return r, nil
	}
	if err := r.Validate(); err != nil {
		return sluice.Rule{}, err
	}
	return r, nil
}
