package rls

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// validate checks a request's shape before anything else is done: domain and descriptors
// present, descriptor and entry counts bounded, keys and values well formed, store keys not
// too long. An unknown domain is not an error (envoyproxy/ratelimit answers OK with no
// limits, so that Envoy's failure_mode_deny does not deny all traffic): its Domain is nil.
func (e *Engine) validate(st *rules, req *Request) (*config.Domain, error) {
	if st.pending {
		return nil, &Error{Kind: KindUnavailable, Msg: ErrNoRules.Error(), Err: ErrNoRules}
	}
	if req.Domain == "" {
		return nil, invalid("domain: empty")
	}
	if err := config.CheckValue(req.Domain); err != nil {
		return nil, invalid("domain %s: %v", quote(req.Domain), err)
	}
	dom := st.cfg.Domain(req.Domain)
	if dom == nil {
		e.unknownDomain(req.Domain)
	}
	n := len(req.Descriptors)
	if n == 0 {
		return nil, invalid("descriptors: empty")
	}
	if n > e.maxDescriptors {
		return nil, invalid("descriptors: %d, more than the maximum of %d", n, e.maxDescriptors)
	}
	for i := range req.Descriptors {
		if err := e.validateDescriptor(i, len(req.Domain), &req.Descriptors[i]); err != nil {
			return nil, err
		}
	}
	return dom, nil
}

func (e *Engine) validateDescriptor(i, domainLen int, d *Descriptor) error {
	if len(d.Entries) > e.maxDescEntries {
		return invalid("descriptors[%d].entries: %d, more than the maximum of %d", i, len(d.Entries), e.maxDescEntries)
	}
	size := keyLen(domainLen, d.Entries)
	if size > e.maxKeyLen {
		return invalid("descriptors[%d]: its store key would be %d bytes, more than the maximum of %d", i, size, e.maxKeyLen)
	}
	for j, en := range d.Entries {
		if en.Key == "" && d.Limit != nil {
			return invalid("descriptors[%d].entries[%d].key: empty", i, j)
		}
		if err := config.CheckKey(en.Key); err != nil {
			return invalid("descriptors[%d].entries[%d].key %s: %v", i, j, quote(en.Key), err)
		}
		if err := config.CheckValue(en.Value); err != nil {
			// The value hashed as telemetry shows it: it may be an API key.
			return invalid("descriptors[%d].entries[%d].value %s: %v", i, j, hashValue(en.Value), err)
		}
	}
	if l := d.Limit; l != nil {
		if len(d.Entries) == 0 {
			return invalid("descriptors[%d].entries: empty (a limit override needs entries to count under)", i)
		}
		return e.checkOverride(i, l)
	}
	return nil
}

// checkOverride checks the limit override of descriptor i: allowed by Config.RequestRules,
// valid, and within the ceilings on rules supplied by requests.
func (e *Engine) checkOverride(i int, l *Override) error {
	field := fmt.Sprintf("descriptors[%d].limit", i)
	if err := e.requestRules.supplied(field); err != nil {
		return err
	}
	r, err := overrideRule(l, e.defaultAlgorithm)
	if err != nil {
		return invalid("%s: %v", field, err)
	}
	if r.Limit == 0 {
		return nil // a block
	}
	return e.requestRules.check(field, field+".unit", r)
}

// overrideRule is the rule of a limit supplied by the request: requests_per_unit per unit x
// unit_multiplier, of the default algorithm. requests_per_unit 0 blocks (as in
// envoyproxy/ratelimit): the rule returned has Limit 0 and is never sent to a store.
func overrideRule(l *Override, algo sluice.Algorithm) (sluice.Rule, error) {
	unit := l.Unit.Duration()
	if unit == 0 {
		return sluice.Rule{}, fmt.Errorf("unit: unknown value %d", l.Unit)
	}
	mult := uint32(1)
	if l.UnitMultiplier > 0 {
		mult = l.UnitMultiplier
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
