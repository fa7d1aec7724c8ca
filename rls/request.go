package rls

import (
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/config"
)

// Request is one rate-limit request: the fields of Envoy's RateLimitRequest the engine reads.
// A transport fills it from its own message (server: rlsv3.RateLimitRequest; proxy: an HTTP
// request) and may reuse it between requests.
type Request struct {
	// Domain names the rules' domain; a domain no rules define applies no limit.
	Domain string
	// Descriptors are decided together (see Engine.Decide).
	Descriptors []Descriptor
	// HitsAddend is the cost of each descriptor without its own HitsAddend (0 is 1).
	HitsAddend uint32
}

// Descriptor is one descriptor of a Request.
type Descriptor struct {
	// Entries are the descriptor's key/value pairs, matched against the rules in order.
	Entries []Entry
	// Limit, when not nil, is the descriptor's own limit (RLS's limit override), in place of
	// the rules'.
	Limit *Override
	// HitsAddend, when not nil, is the descriptor's cost in place of the request's (0: a peek).
	HitsAddend *uint64
	// IsNegativeHits makes the cost a refund.
	IsNegativeHits bool
}

// Entry is one key/value pair of a Descriptor.
type Entry struct {
	Key, Value string
}

// GetKey returns the key (config.Entry).
func (e Entry) GetKey() string { return e.Key }

// GetValue returns the value (config.Entry).
func (e Entry) GetValue() string { return e.Value }

// Override is a limit a descriptor brings: RequestsPerUnit per Unit x UnitMultiplier (0 or 1:
// one unit), of the rules' default algorithm. RequestsPerUnit 0 blocks.
type Override struct {
	RequestsPerUnit uint32
	Unit            config.Unit
	UnitMultiplier  uint32
}

// Code is the answer to a request or a descriptor.
type Code int

// The codes, numbered as RLS's RateLimitResponse.Code.
const (
	CodeUnknown   Code = 0
	CodeOK        Code = 1
	CodeOverLimit Code = 2
)

// String returns the code's RLS name.
func (c Code) String() string {
	switch c {
	case CodeOK:
		return "OK"
	case CodeOverLimit:
		return "OVER_LIMIT"
	}
	return "UNKNOWN"
}

// Answer is the outcome of a request. Engine.Decide fills it; a caller may reuse it (its
// Verdicts keep their capacity).
type Answer struct {
	// Code is the overall code: OVER_LIMIT when a descriptor outside quota mode is over its
	// limit, or when every quota-mode descriptor is; OK in global shadow mode.
	Code Code
	// Verdicts has one entry per descriptor of the request, in order.
	Verdicts []Verdict
	// Tightest is the index of the verdict closest to its limit (the last one over it wins),
	// the one rate-limit headers describe; -1 when no descriptor is limited.
	Tightest int
	// Rules are the rules the request was decided under.
	Rules *config.Config

	rules []sluice.Decision // backs the verdicts' Decisions
}

// Verdict is the outcome of one descriptor.
type Verdict struct {
	// Code is OVER_LIMIT when the descriptor is over its limit and not in shadow mode.
	Code Code
	// Limit is the configured limit the descriptor matched: nil when none did or when the
	// descriptor brought its own limit (Override).
	Limit *config.Limit
	// Override is the descriptor's own limit when it applied (the domain is defined).
	Override *Override
	// Limited reports whether a limit applies to the descriptor (a store call or a block):
	// false when no limit matched or the limit is unlimited; the fields below are then zero,
	// but for Remaining, math.MaxUint32 for an unlimited limit.
	Limited bool
	// Over reports whether the descriptor is over its limit, in shadow mode too; Shadow
	// whether its limit is in shadow mode, Quota in quota mode, Block whether the limit blocks
	// every request (requests_per_unit 0).
	Over, Shadow, Quota, Block bool
	// Never reports a denial because the cost is above the capacity of one of the rules, so
	// that the same request can never be allowed.
	Never bool
	// Binding is the index of the binding rule (the one with the least remaining) in
	// Limit.Rules; Rule is that rule (the override's rule for an Override; zero for a
	// configured block, which has no rule).
	Binding int
	Rule    sluice.Rule
	// Decision is the descriptor's decision under its rules (Allowed false when it is over
	// its limit, in shadow mode too).
	Decision sluice.Decision
	// Decisions[j] is the decision of rule j alone (Limit.Rules[j], or the override's rule):
	// Allowed false when that rule is over its limit, its own Limit, Remaining and resets (a
	// rule only peeked after another denied has RetryAfter ResetAfter, a bound). Nil
	// when no rule was asked (a block, a hot parameter's cold value, no limit). It shares the
	// Answer's memory: valid until the Answer is reused.
	Decisions []sluice.Decision
	// Remaining is RLS's limit_remaining: 0 when over the limit.
	Remaining uint32
	// Reset is RLS's duration_until_reset, in whole seconds rounded up as the peer's.
	Reset time.Duration
	// Key is the descriptor's counter key when its limit has a max_in_flight
	// (Limit.InFlight): the transport leases the request's slot under it (Engine.Limiter).
	// Empty otherwise.
	Key string
	// Adaptive is the in-flight limit in force when the max_in_flight is adaptive
	// (Limit.InFlight.Adaptive): the engine's runtime state of the limit, kept across
	// reloads that keep its settings. The transport acquires with its Limit and tells it
	// each request's round trip. Nil otherwise.
	Adaptive *adaptive.Gradient
}

// Denied reports whether the descriptor denies the request: over its limit and not in
// shadow mode.
func (v *Verdict) Denied() bool { return v.Code == CodeOverLimit }

// Settled is the outcome of one descriptor of Engine.Settle.
type Settled struct {
	// Settles reports whether the descriptor has a limit with state in the store; when false,
	// Block tells a limit that blocks every request from no limit at all.
	Settles, Block bool
	// Decision is the descriptor's decision after the settle.
	Decision sluice.Decision
}

// CurrentLimit is the limit a verdict reports, as RLS's current_limit: RequestsPerUnit per
// Unit x UnitMultiplier (0 or 1: one unit), and the rate_limit's Name when it has one.
type CurrentLimit struct {
	RequestsPerUnit uint32
	Unit            config.Unit
	UnitMultiplier  uint32
	Name            string
}

// RuleLimit is the CurrentLimit of rule i of limit l; of its window, with RequestsPerUnit 0,
// for a limit that blocks (requests_per_unit 0), whatever i.
func RuleLimit(l *config.Limit, i int) CurrentLimit {
	var r sluice.Rule
	if l.Block {
		r = sluice.Rule{Period: l.Unit.Duration() * time.Duration(max(l.UnitMultiplier, 1))}
	} else {
		r = l.Rules[i]
	}
	unit, mult := config.UnitOf(r.Period)
	c := CurrentLimit{RequestsPerUnit: uint32(min(max(r.Limit, 0), math.MaxUint32)), Unit: unit}
	if l.Name != l.FullKey {
		c.Name = l.Name
	}
	if mult > 1 {
		c.UnitMultiplier = mult
	}
	return c
}

// Current returns the CurrentLimit of a limited verdict: its binding rule's (RuleLimit), or
// the descriptor's own limit (Override).
func (v *Verdict) Current() CurrentLimit {
	if o := v.Override; o != nil {
		c := CurrentLimit{RequestsPerUnit: o.RequestsPerUnit, Unit: o.Unit}
		if o.UnitMultiplier > 1 {
			c.UnitMultiplier = o.UnitMultiplier
		}
		return c
	}
	return RuleLimit(v.Limit, v.Binding)
}
