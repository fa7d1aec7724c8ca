package rls

import (
	"context"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// The key form decides units of one key under a rule supplied by the request or a limit of
// the rules named by it (server: POST /v1/allow and /v1/settle {"key", "rule"}). A transport
// checks a request with CheckKey, then NamedLimit or AllowSuppliedRule and CheckSuppliedRule,
// then CheckKeyRules, and decides it with DecideKey or SettleKey.

// CheckKey checks the key of a key-form request: not empty, at most Config.MaxKeyLength
// bytes, no control characters.
func (e *Engine) CheckKey(key string) error {
	if key == "" {
		return invalid("key: empty")
	}
	if len(key) > e.maxKeyLen {
		return invalid("key: %d bytes, more than the maximum of %d", len(key), e.maxKeyLen)
	}
	if err := config.CheckKey(key); err != nil {
		return invalid("key %s: %v", hashValue(key), err) // hashed as telemetry shows it: it may be an API key
	}
	return nil
}

// CheckKeyRules checks that the keys of every rule of lim fit in Config.MaxKeyLength: the
// second and later rules count under key + "|#N".
func (e *Engine) CheckKeyRules(key string, lim *config.Limit) error {
	if n := len(lim.Rules); n > 1 && len(key)+4 > e.maxKeyLen {
		return invalid("key: %d bytes, more than the maximum of %d for a limit of %d rules", len(key), e.maxKeyLen-4, n)
	}
	return nil
}

// NamedLimit returns the limit of the rules in force that a request names at field (a
// descriptor path "domain.key_value.key" or a rate_limit name), refused with RequestRulesOff.
func (e *Engine) NamedLimit(field, name string) (*config.Limit, error) {
	if e.requestRules.mode == RequestRulesOff {
		return nil, e.requestRules.supplied(field)
	}
	return e.rules.Load().namedLimit(field, name)
}

// AllowSuppliedRule reports why a rule supplied by the request at field is refused by
// Config.RequestRules, or nil when requests may supply rules.
func (e *Engine) AllowSuppliedRule(field string) error { return e.requestRules.supplied(field) }

// CheckSuppliedRule applies the ceilings (Config.MaxRequest*) to a valid rule supplied by the
// request at field (its period at periodField), naming the field and the ceiling.
func (e *Engine) CheckSuppliedRule(field, periodField string, r sluice.Rule) error {
	return e.requestRules.check(field, periodField, r)
}

// unlimitedKey is the decision of a key form naming an unlimited limit.
var unlimitedKey = sluice.Decision{Allowed: true, Capacity: -1, Remaining: -1}

// DecideKey decides n units of key under every rule of lim (the second and later rules of a
// named limit count under key + "|#N", as descriptors do; per-instance rules on the
// instance's memory): all must admit. criticality is the request's class ("" is CRITICAL);
// a supplied rule then shares its capacity by sluice.DefaultShares. A limit without rules
// (unlimited) allows with Limit and Remaining -1. The decision is told to the Observer;
// errors are Decide's.
func (e *Engine) DecideKey(ctx context.Context, key string, lim *config.Limit, n int64, criticality string) (sluice.Decision, error) {
	if len(lim.Rules) == 0 {
		e.obs.KeyDecided(true)
		return unlimitedKey, nil
	}
	d, err := e.decideKey(ctx, key, e.classLimit(lim, criticality), n, e.classOf(criticality))
	if err != nil {
		return d, e.storeError(ctx, err)
	}
	e.obs.KeyDecided(d.Allowed)
	return d, nil
}

func (e *Engine) decideKey(ctx context.Context, key string, lim *config.Limit, n int64, class sluice.Criticality) (sluice.Decision, error) {
	checks := make([]sluice.Check, len(lim.Rules))
	for i, r := range lim.Rules {
		checks[i] = sluice.Check{Key: checkKey(lim, key, i), Rule: r, N: n}
		if sh := lim.SharesOf(i); sh != nil && n > 0 {
			checks[i].Holdback = sh.Holdback(class, r.Capacity())
		}
	}
	l := e.limiterFor(checks)
	if len(checks) == 1 && checks[0].Holdback == 0 {
		return l.AllowN(ctx, checks[0].Key, checks[0].Rule, n)
	}
	if n > 0 {
		return l.AllowAll(ctx, checks)
	}
	allowed := true // a peek: each rule on its own (AllowAll takes at least one unit)
	for i := range checks {
		d, err := l.AllowN(ctx, checks[i].Key, checks[i].Rule, 0)
		if err != nil {
			return sluice.Decision{}, err
		}
		checks[i].Decision, allowed = d, allowed && d.Allowed
	}
	d, _ := sluice.Combine(checks, allowed)
	return d, nil
}

// SettleKey settles delta units of key under every rule of lim (negative: a refund), keyed as
// DecideKey keys them; see sluice.Limiter.Settle. The answer is always allowed, with
// Remaining 0 and RetryAfter, when the key is in debt, until the debt is paid. A limit
// without rules allows with Limit and Remaining -1. Errors are Decide's.
func (e *Engine) SettleKey(ctx context.Context, key string, lim *config.Limit, delta int64) (sluice.Decision, error) {
	if len(lim.Rules) == 0 {
		e.obs.KeyDecided(true)
		return unlimitedKey, nil
	}
	checks := make([]sluice.Check, len(lim.Rules))
	for i, r := range lim.Rules {
		checks[i] = sluice.Check{Key: checkKey(lim, key, i), Rule: r, N: delta}
	}
	if err := e.settleChecks(ctx, checks); err != nil {
		return sluice.Decision{}, e.storeError(ctx, err)
	}
	return CombineSettled(checks), nil
}

// settleChecks settles each check's N on its own, filling in its Decision (a per-instance
// limit's on this instance's memory).
func (e *Engine) settleChecks(ctx context.Context, checks []sluice.Check) error {
	l := e.limiterFor(checks)
	for i := range checks {
		c := &checks[i]
		d, err := l.Settle(ctx, c.Key, c.Rule, c.N)
		if err != nil {
			return err
		}
		c.Decision = d
	}
	return nil
}

// CombineSettled combines the decisions of settled checks: allowed, the binding check's Limit
// and Remaining, the longest ResetAfter and the longest RetryAfter (until every debt is paid).
func CombineSettled(checks []sluice.Check) sluice.Decision {
	d, _ := sluice.Combine(checks, true)
	for _, c := range checks {
		d.RetryAfter = max(d.RetryAfter, c.Decision.RetryAfter)
	}
	return d
}
