package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicehq/sluice"
)

// ErrInvalid is wrapped by every validation problem.
var ErrInvalid = errors.New("config: invalid rules")

// Config is a compiled, validated set of rules: one Domain per name. It is immutable and safe
// for concurrent use.
type Config struct {
	domains    map[string]*Domain
	limits     []*Limit
	files      []string
	rateLimits int
}

// RateLimits counts the rate limits of the rules: every rate_limit, and every entry of a
// rate_limits list (a descriptor with 4 rate_limits counts 4), unlimited ones included.
func (c *Config) RateLimits() int { return c.rateLimits }

// Domain is the compiled descriptor tree of one domain.
type Domain struct {
	// Name is the domain's name.
	Name string
	// Proxy are the rate limits of the document's proxy section; nil without one.
	Proxy []ProxyRateLimit
	// Budgets are the budgets of its proxy section (ProxyBudget), compiled.
	Budgets []*Budget
	root    node

	quota []*QuotaRule // the RLQS quota rules, in file order (quota.go)
}

// Limit is the compiled limit of one descriptor: one or more rules that must all pass.
type Limit struct {
	// Domain is the domain the limit belongs to.
	Domain string
	// FullKey is the envoyproxy/ratelimit-style key of the descriptor path, e.g.
	// "api.path_/login.remote_address", used as the metrics label.
	FullKey string
	// Name is the rate_limit name (the first named one), or FullKey.
	Name string
	// Rules are the limits; empty when Unlimited.
	Rules []sluice.Rule
	// RuleNames[i] names Rules[i] to clients (sluice proxy's RateLimit headers and 429 body):
	// its rate_limit's name, else FullKey, suffixed "[n]" when the rate_limit is not the first
	// (n is its index in rate_limits), so that the limits of one descriptor differ.
	RuleNames []string
	// Local[i] reports whether Rules[i] is a per-instance limit (scope: local), decided in
	// the instance's own memory, rather than a cluster limit on the shared store. Nil when
	// every rule is a cluster limit.
	Local []bool
	// Global[i] reports whether Rules[i] is a limit of every region (scope: global), its
	// budget shared between the service's regions. Nil when no rule is.
	Global []bool
	// Shares[i], when not nil, are the criticality shares of Rules[i] (rate_limit's
	// criticality): a request of class c may be admitted only while c's share of the rule's
	// capacity holds. Nil when no rule has them.
	Shares []*sluice.Shares
	// Hot, when set, tracks the descriptor's values in a bounded sketch (package hotkey): the
	// cold values are admitted without a store call.
	Hot *HotParam
	// InFlight, when set, is the descriptor's max_in_flight, enforced by the transports that
	// see a request end (sluice proxy, httplimit, grpclimit). A limit may have it alone, with
	// no Rules.
	InFlight *InFlightLimit
	// Unlimited admits every request without a store call.
	Unlimited bool
	// ShadowMode decides and counts, but always answers OK.
	ShadowMode bool
	// DetailedMetric labels metrics with the request's values.
	DetailedMetric bool
	// ValueToMetric is set when a descriptor on the limit's path has value_to_metric: the
	// envoyproxy/ratelimit metric key then carries the request's value at that level (see
	// MetricKey).
	ValueToMetric bool
	// QuotaMode: an OVER_LIMIT of this limit denies the request only when every quota-mode
	// descriptor of the request is over its limit.
	QuotaMode bool
	// Block is set by requests_per_unit: 0: every request is OVER_LIMIT, without a store call.
	Block bool
	// Metadata is the descriptor's metadata, as decoded from YAML.
	Metadata map[string]any
	// Replaces names limits this one replaces in the same request.
	Replaces []string
	// Unit, UnitMultiplier and RequestsPerUnit describe Rules[0] in RLS terms.
	Unit            Unit
	UnitMultiplier  uint32
	RequestsPerUnit uint32
	// Index is the limit's position in Config.Limits.
	Index int
	// RawValues[i] reports whether the value of a request's i-th entry may appear as sent
	// in telemetry (the live view and its gauges): its descriptor names the value exactly, is
	// a share_threshold wildcard (the key holds the pattern), or has telemetry: raw. Other
	// values are hashed.
	RawValues []bool
	// File and Line locate the descriptor in the rules.
	File string
	Line int
}

type node struct {
	keys  map[string]*keyNode
	limit *Limit
	// share is share_threshold; valueToMetric is value_to_metric; pattern is the configured
	// value of a wildcard node.
	share, valueToMetric bool
	pattern              string
}

type keyNode struct {
	values   map[string]*node
	patterns []pattern // in config order: the first match wins
	any      *node
}

// pattern is a value with '*' (each matching any run of bytes), split at its stars.
type pattern struct {
	parts []string
	n     *node
}

// matches reports whether value matches the pattern split into parts; it allocates nothing.
func matches(parts []string, value string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || value[:len(first)] != first || value[len(value)-len(last):] != last {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// Domain returns the domain with the given name, or nil.
func (c *Config) Domain(name string) *Domain {
	if c == nil {
		return nil
	}
	return c.domains[name]
}

// Domains returns the domain names, sorted.
func (c *Config) Domains() []string {
	names := make([]string, 0, len(c.domains))
	for n := range c.domains {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Limits returns every limit of every domain, indexed by Limit.Index. The slice must not be
// modified.
func (c *Config) Limits() []*Limit { return c.limits }

// Dump is envoyproxy/ratelimit's dump of its rules (its /rlconfig): "<full key>:
// unit=<UNIT> requests_per_unit=<n>, shadow_mode: <bool>, quota_mode: <bool>" a line per
// limit, sorted; an unlimited limit's unit is UNKNOWN.
func (c *Config) Dump() string {
	lines := make([]string, 0, len(c.limits))
	for _, l := range c.limits {
		unit := strings.ToUpper(l.Unit.String())
		if l.Unlimited {
			unit = "UNKNOWN"
		}
		lines = append(lines, fmt.Sprintf("%s: unit=%s requests_per_unit=%d, shadow_mode: %t, quota_mode: %t\n",
			l.FullKey, unit, l.RequestsPerUnit, l.ShadowMode, l.QuotaMode))
	}
	sort.Strings(lines)
	return strings.Join(lines, "")
}

// Files returns the names of the files the config was built from.
func (c *Config) Files() []string { return c.files }

// Entry is one key/value pair of a request's descriptor.
type Entry interface {
	GetKey() string
	GetValue() string
}

// Lookup finds the limit of a descriptor made of entries, with envoyproxy/ratelimit's
// semantics: each entry descends one level of the tree, matching key and value exactly, then
// the values with '*' (anywhere, any number; the first in config order wins), then the key
// alone (any value); the limit applies only when the last entry lands on a descriptor that has
// one. It returns nil when no limit applies. Lookup allocates nothing.
func Lookup[E Entry](d *Domain, entries []E) *Limit {
	return LookupShared(d, entries, nil)
}

// LookupShared is Lookup that also reports, when shared is not nil (len(shared) >=
// len(entries)), the entries matched by a share_threshold wildcard: shared[i] is the
// configured value (e.g. "files/*") that replaces entry i's value in the counter's key, ""
// for the others. It allocates nothing.
func LookupShared[E Entry](d *Domain, entries []E, shared []string) *Limit {
	if d == nil {
		return nil
	}
	cur := &d.root
	for i, e := range entries {
		next, _ := cur.find(e.GetKey(), e.GetValue())
		if next == nil {
			return nil
		}
		if shared != nil {
			shared[i] = ""
			if next.share {
				shared[i] = next.pattern
			}
		}
		if i == len(entries)-1 {
			return next.limit
		}
		if len(next.keys) == 0 {
			return nil
		}
		cur = next
	}
	return nil
}

// The ways an entry matches a descriptor.
const (
	matchExact = iota
	matchPattern
	matchAny
)

func (n *node) find(key, value string) (*node, int) {
	k := n.keys[key]
	if k == nil {
		return nil, 0
	}
	if m := k.values[value]; m != nil {
		return m, matchExact
	}
	for _, p := range k.patterns {
		if matches(p.parts, value) {
			return p.n, matchPattern
		}
	}
	return k.any, matchAny
}

// MetricKey is envoyproxy/ratelimit's stats key of a request's descriptor whose limit is l
// (as Lookup found it): l.FullKey, unless l.DetailedMetric ("domain.key_value.key_value"
// with the request's values; share_threshold entries keep their pattern) or l.ValueToMetric
// (the configured path, with the request's value at the levels that have value_to_metric).
func MetricKey[E Entry](d *Domain, entries []E, l *Limit) string {
	if l == nil || d == nil || (!l.DetailedMetric && !l.ValueToMetric) {
		if l == nil {
			return ""
		}
		return l.FullKey
	}
	type step struct {
		n   *node
		how int
	}
	steps := make([]step, len(entries))
	anyShared := false
	cur := &d.root
	for i, e := range entries {
		next, how := cur.find(e.GetKey(), e.GetValue())
		if next == nil {
			return l.FullKey
		}
		steps[i] = step{next, how}
		anyShared = anyShared || (next.share && how == matchPattern)
		cur = next
	}
	var b strings.Builder
	b.WriteString(d.Name)
	for i, e := range entries {
		n, how := steps[i].n, steps[i].how
		b.WriteByte('.')
		b.WriteString(e.GetKey())
		value := e.GetValue()
		switch {
		case n.share && how == matchPattern:
			value = n.pattern
		case l.DetailedMetric && !anyShared:
			b.WriteByte('_') // the peer writes "key_" for an empty value too
		case l.DetailedMetric:
		case how == matchPattern && !n.valueToMetric:
			value = n.pattern
		case how == matchAny && !n.valueToMetric:
			value = ""
		}
		if value != "" {
			if !l.DetailedMetric || anyShared || (n.share && how == matchPattern) {
				b.WriteByte('_')
			}
			b.WriteString(value)
		}
	}
	return b.String()
}
