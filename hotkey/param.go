package hotkey

import (
	"context"
	"fmt"
	"sync"
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
// Space-Saving sketch of the current and of the previous period (periods aligned on
// multiples of the rule's period) bounds each value's count; a value whose bound, with the
// request, stays within ColdLimit is admitted without a store call. Param is safe for
// concurrent use.
type Param struct {
	rule  sluice.Rule
	cold  int64
	clock sluice.Clock

	mu        sync.Mutex
	epoch     int64
	cur, prev *sketch

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
	p := &Param{rule: rule, cold: cfg.ColdLimit, clock: cfg.Clock}
	k := cfg.TopK
	if k == 0 {
		k = DefaultTopK
	}
	if p.cold == 0 {
		p.cold = max(1, rule.Capacity()/10)
	}
	if p.cold > rule.Capacity() {
		return nil, &sluice.FieldError{Err: sluice.ErrInvalidRule, Field: "cold_limit", Reason: fmt.Sprintf("%d is above the rule's capacity %d", p.cold, rule.Capacity())}
	}
	if p.clock == nil {
		p.clock = sluice.SystemClock{}
	}
	p.cur, p.prev = newSketch(k), newSketch(k)
	return p, nil
}

// Rule returns the rule each value is limited by.
func (p *Param) Rule() sluice.Rule { return p.rule }

// ColdLimit returns the units of one value admitted per period without a store call
// (negative: none).
func (p *Param) ColdLimit() int64 { return p.cold }

// Verdict is what Observe decided for one request.
type Verdict struct {
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
func (p *Param) Observe(value string, n int64) Verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rotate()
	bound := p.cur.bound(value) + p.prev.bound(value)
	e := p.cur.add(value, n)
	if p.cold >= 0 && bound+n <= p.cold {
		p.coldAdmits.Add(1)
		return Verdict{Cold: true, Bound: bound}
	}
	p.storeCalls.Add(1)
	v := Verdict{Bound: bound}
	if !e.charged {
		v.Charge = e.count - n // its earlier units in this period, all cold until now
		if pe := p.prev.byValue[value]; pe != nil && !pe.charged {
			v.Charge += pe.count
		} else if pe == nil {
			v.Charge += p.prev.bound(value)
		}
		e.charged = true
	}
	return v
}

// Denied records that the store denied a request of value (for Top).
func (p *Param) Denied(value string) {
	p.mu.Lock()
	if e := p.cur.byValue[value]; e != nil {
		e.denied++
	}
	p.mu.Unlock()
}

// uncharge forgets that value was charged, after the charge failed.
func (p *Param) uncharge(value string) {
	p.mu.Lock()
	if e := p.cur.byValue[value]; e != nil {
		e.charged = false
	}
	p.mu.Unlock()
}

// rotate moves to the clock's period; held under p.mu.
func (p *Param) rotate() {
	epoch := p.clock.Now().UnixNano() / int64(p.rule.Period)
	switch {
	case epoch == p.epoch:
		return
	case epoch == p.epoch+1:
		p.prev.reset()
		p.cur, p.prev = p.prev, p.cur
	case epoch > p.epoch+1:
		p.cur.reset()
		p.prev.reset()
	default:
		return // the clock went back: keep the period (it can only over-count)
	}
	p.epoch = epoch
}

// Allow decides n units of value, whose store key is key, on l: cold values are admitted
// without a store call, the others by the store after the charge of their cold admissions.
func (p *Param) Allow(ctx context.Context, l *sluice.Limiter, key, value string, n int64) (sluice.Decision, error) {
	v := p.Observe(value, n)
	if v.Cold {
		return p.ColdDecision(v, n), nil
	}
	if v.Charge > 0 {
		if _, err := l.Settle(ctx, key, p.rule, v.Charge); err != nil {
			p.uncharge(value)
			return sluice.Decision{}, err
		}
	}
	d, err := l.AllowN(ctx, key, p.rule, n)
	if err == nil && !d.Allowed {
		p.Denied(value)
	}
	return d, err
}

// ColdDecision is the Decision of a request admitted cold: Remaining is a lower bound.
func (p *Param) ColdDecision(v Verdict, n int64) sluice.Decision {
	c := p.rule.Capacity()
	return sluice.Decision{Allowed: true, Limit: c, Remaining: max(0, c-v.Bound-n), ResetAfter: p.rule.Period}
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

// Value is one tracked value in Top.
type Value struct {
	// Value is the parameter's value.
	Value string `json:"value"`
	// Rate is the value's requests per second over the last period, an upper bound (the
	// sliding estimate of the current and the previous period), and Error how much of it may
	// be other values' (Space-Saving's error).
	Rate  float64 `json:"rate"`
	Error float64 `json:"error"`
	// DeniedRate is the requests per second the store denied in the current period.
	DeniedRate float64 `json:"denied_rate"`
}

// Top returns the n values of highest rate (all tracked values when n <= 0), highest first,
// and the total rate of the parameter.
func (p *Param) Top(n int) ([]Value, float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rotate()
	now := p.clock.Now().UnixNano()
	period := int64(p.rule.Period)
	elapsed := float64(now-p.epoch*period) / float64(period)
	secs := p.rule.Period.Seconds()
	weight := 1 - elapsed // of the previous period
	out := make([]Value, 0, len(p.cur.heap)+len(p.prev.heap))
	seen := make(map[string]int, len(p.cur.heap))
	for _, e := range p.cur.heap {
		seen[e.value] = len(out)
		out = append(out, Value{Value: e.value, Rate: float64(e.count) / secs, Error: float64(e.err) / secs,
			DeniedRate: float64(e.denied) / max(elapsed*secs, 1e-3)})
	}
	for _, e := range p.prev.heap {
		r := float64(e.count) * weight / secs
		if i, ok := seen[e.value]; ok {
			out[i].Rate += r
			out[i].Error += float64(e.err) * weight / secs
			continue
		}
		out = append(out, Value{Value: e.value, Rate: r, Error: float64(e.err) * weight / secs})
	}
	sortValues(out)
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	total := (float64(p.cur.total) + float64(p.prev.total)*weight) / secs
	return out, total
}
