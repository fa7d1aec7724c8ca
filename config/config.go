package config

import (
	"errors"
	"sort"

	"github.com/sluicehq/sluice"
)

// ErrInvalid is wrapped by every validation problem.
var ErrInvalid = errors.New("config: invalid rules")

// Config is a compiled, validated set of rules: one Domain per name. It is immutable and safe
// for concurrent use.
type Config struct {
	domains map[string]*Domain
	limits  []*Limit
	files   []string
}

// Domain is the compiled descriptor tree of one domain.
type Domain struct {
	// Name is the domain's name.
	Name string
	root node
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
	// Local[i] reports whether Rules[i] is a per-instance limit (scope: local), decided in
	// the instance's own memory, rather than a cluster limit on the shared store. Nil when
	// every rule is a cluster limit.
	Local []bool
	// Shares[i], when not nil, are the criticality shares of Rules[i] (rate_limit's
	// criticality): a request of class c may be admitted only while c's share of the rule's
	// capacity holds. Nil when no rule has them.
	Shares []*sluice.Shares
	// Hot, when set, tracks the descriptor's values in a bounded sketch (package hotkey): the
	// cold values are admitted without a store call.
	Hot *HotParam
	// Unlimited admits every request without a store call.
	Unlimited bool
	// ShadowMode decides and counts, but always answers OK.
	ShadowMode bool
	// DetailedMetric labels metrics with the request's values.
	DetailedMetric bool
	// Replaces names limits this one replaces in the same request.
	Replaces []string
	// Unit, UnitMultiplier and RequestsPerUnit describe Rules[0] in RLS terms.
	Unit            Unit
	UnitMultiplier  uint32
	RequestsPerUnit uint32
	// Index is the limit's position in Config.Limits.
	Index int
	// File and Line locate the descriptor in the rules.
	File string
	Line int
}

type node struct {
	keys  map[string]*keyNode
	limit *Limit
}

type keyNode struct {
	values    map[string]*node
	wildcards []wildcard
	any       *node
}

type wildcard struct {
	prefix string
	n      *node
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

// Files returns the names of the files the config was built from.
func (c *Config) Files() []string { return c.files }

// Entry is one key/value pair of a request's descriptor.
type Entry interface {
	GetKey() string
	GetValue() string
}

// Lookup finds the limit of a descriptor made of entries, with envoyproxy/ratelimit's
// semantics: each entry descends one level of the tree, matching key and value exactly, then
// a value prefix ending in '*', then the key alone (any value); the limit applies only when the
// last entry lands on a descriptor that has one. It returns nil when no limit applies. Lookup
// allocates nothing.
func Lookup[E Entry](d *Domain, entries []E) *Limit {
	if d == nil {
		return nil
	}
	cur := &d.root
	for i, e := range entries {
		next := cur.find(e.GetKey(), e.GetValue())
		if next == nil {
			return nil
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

func (n *node) find(key, value string) *node {
	k := n.keys[key]
	if k == nil {
		return nil
	}
	if m := k.values[value]; m != nil {
		return m
	}
	for _, w := range k.wildcards {
		if len(value) >= len(w.prefix) && value[:len(w.prefix)] == w.prefix {
			return w.n
		}
	}
	return k.any
}
