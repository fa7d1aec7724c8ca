package hotkey

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// DefaultTopK is the number of values a Param tracks unless configured otherwise.
const DefaultTopK = 1000

// Config configures a Param. The zero value of every field is a documented default.
type Config struct {
	// TopK is how many values are tracked (default DefaultTopK): the sketch holds TopK values
	// in each of two periods, whatever the parameter's cardinality.
	TopK int
	// ColdLimit is how many units of one value this instance admits in a period without a
	// store call (default: a tenth of the rule's capacity, at least 1). Past it, the value's
	// requests go to the store, first charged with what was admitted cold. Negative sends
	// every request to the store. In a fleet of N instances a value may be admitted up to
	// (N-1) x ColdLimit units above its limit in a period; ColdLimit <= limit / N keeps it
	// exact (see the package documentation).
	ColdLimit int64
	// Clock is the time of the periods (default sluice.SystemClock).
	Clock sluice.Clock
}

// Param limits each value of one parameter separately under one rule, in bounded memory: a
// Tracker over the rule's period, whose Space-Saving and Count-Min sketches of the current and
// the previous period bound each value's count; a value whose bound, with the request, stays
// within ColdLimit is admitted without a store call. Param is safe for concurrent use.
type Param struct {
	rule    sluice.Rule
	cold    int64
	tracker *Tracker

	coldAdmits, storeCalls atomic.Int64
}

// New returns a Param for rule. The error names the bad field.
func New(rule sluice.Rule, cfg Config) (*Param, error) {
	if err := rule.Validate(); err != nil {
		return nil, err
	}
	if cfg.TopK < 0 {
		return nil, &sluice.FieldError{Err: sluice.ErrInvalidRule, Field: "top_k", Reason: fmt.Sprintf("must be positive, got %d", cfg.TopK)}
	}
	p := &Param{rule: rule, cold: cfg.ColdLimit, tracker: newTracker(cfg.TopK, rule.Period, cfg.Clock, true)}
	if p.cold == 0 {
		p.cold = max(1, rule.Capacity()/10)
	}
	if p.cold > rule.Capacity() {
		return nil, &sluice.FieldError{Err: sluice.ErrInvalidRule, Field: "cold_limit", Reason: fmt.Sprintf("%d is above the rule's capacity %d", p.cold, rule.Capacity())}
	}
	return p, nil
}

// Rule returns the rule each value is limited by.
func (p *Param) Rule() sluice.Rule { return p.rule }

// ColdLimit returns the units of one value admitted per period without a store call
// (negative: none).
func (p *Param) ColdLimit() int64 { return p.cold }

// Observation is what Observe decided for one request.
type Observation struct {
	// Cold: admitted without a store call.
	Cold bool
	// Charge, when not Cold, is what the store must be charged (Limiter.Settle) before it
	// decides: an upper bound of the units of the value admitted cold and not yet charged.
	Charge int64
	// Bound is an upper bound of the value's units in the last period, before this request.
	Bound int64
}

// Observe counts n units of value and says whether they are admitted cold. A value is cold
// while Bound + n <= ColdLimit, and Bound is at least the value's true count over the current
// and the previous period, so an instance never admits more than ColdLimit units of a value
// cold in any window of one period.
func (p *Param) Observe(value string, n int64) Observation {
	t := p.tracker
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rotate()
	bound := t.cur.bound(value) + t.prev.bound(value)
	e := t.cur.add(value, n)
	if p.cold >= 0 && bound+n <= p.cold {
		p.coldAdmits.Add(1)
		return Observation{Cold: true, Bound: bound}
	}
	p.storeCalls.Add(1)
	v := Observation{Bound: bound}
	if !e.charged {
		v.Charge = t.cur.bound(value) - n // its earlier units in this period, all cold until now
		if pe := t.prev.byValue[value]; pe == nil || !pe.charged {
			v.Charge += t.prev.bound(value)
		}
		e.charged = true
	}
	return v
}

// uncharge forgets that value was charged, after the charge failed.
func (p *Param) uncharge(value string) {
	t := p.tracker
	t.mu.Lock()
	if e := t.cur.byValue[value]; e != nil {
		e.charged = false
	}
	t.mu.Unlock()
}

// Tracker returns the sketch of the parameter's values: Top lists the hottest.
func (p *Param) Tracker() *Tracker { return p.tracker }

// Allow decides n units of value, whose store key is key, on l: cold values are admitted
// without a store call, the others by the store after the charge of their cold admissions.
func (p *Param) Allow(ctx context.Context, l *sluice.Limiter, key, value string, n int64) (sluice.Decision, error) {
	v := p.Observe(value, n)
	if v.Cold {
		return p.ColdDecision(v, n), nil
	}
	if err := p.Charge(ctx, l, key, v); err != nil {
		p.uncharge(value)
		return sluice.Decision{}, err
	}
	d, err := l.AllowN(ctx, key, p.rule, n)
	if err == nil && !d.Allowed {
		p.Denied(value)
	}
	return d, err
}

// ColdDecision is the Decision of a request admitted cold: Remaining is a lower bound.
func (p *Param) ColdDecision(v Observation, n int64) sluice.Decision {
	c := p.rule.Capacity()
	return sluice.Decision{Allowed: true, Capacity: c, Remaining: max(0, c-v.Bound-n), ResetAfter: p.rule.Period}
}

// Stats are a Param's counts since it was built.
type Stats struct {
	// ColdAdmits are the requests admitted without a store call, StoreCalls the others.
	ColdAdmits, StoreCalls int64
}

// Stats returns the counts since the Param was built.
func (p *Param) Stats() Stats {
	return Stats{ColdAdmits: p.coldAdmits.Load(), StoreCalls: p.storeCalls.Load()}
}
