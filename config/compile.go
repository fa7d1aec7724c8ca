package config

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// problems collects validation errors, each naming file, line and field.
type problems struct{ errs []error }

func (p *problems) add(file string, line int, field, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%w: %s:%d: %s: %s", ErrInvalid, file, line, field, fmt.Sprintf(format, args...)))
}

// addRuleError reports a rule that sluice refuses under the rate limit's own field name: the
// rule's limit is the rate limit's requests_per_unit.
func (p *problems) addRuleError(file string, line int, rateLimit string, err error) {
	var fe *sluice.FieldError
	if !errors.As(err, &fe) {
		p.add(file, line, rateLimit, "%v", err)
		return
	}
	field := fe.Field
	if field == "limit" {
		field = "requests_per_unit"
	}
	p.add(file, line, rateLimit+"."+field, "%s", fe.Reason)
}

func (p *problems) err() error { return errors.Join(p.errs...) }

// Validate reports every problem of the document, joined; nil when it compiles.
func (d *Document) Validate() error {
	var p problems
	d.compile(&p, nil)
	return p.err()
}

// Compile validates the documents and builds a Config. Every problem of every document is
// reported, joined, each wrapping ErrInvalid; two documents may not share a domain.
func Compile(docs ...*Document) (*Config, error) {
	var p problems
	c := &Config{domains: make(map[string]*Domain)}
	for _, d := range docs {
		c.files = append(c.files, d.File)
		dom := d.compile(&p, c)
		if dom == nil {
			continue
		}
		if _, dup := c.domains[dom.Name]; dup {
			p.add(d.File, d.line, "domain", "duplicate domain %q (already defined in another file)", dom.Name)
			continue
		}
		c.domains[dom.Name] = dom
	}
	if len(docs) == 0 {
		p.errs = append(p.errs, fmt.Errorf("%w: no rules files", ErrInvalid))
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// compile checks the document and, when c is not nil, builds its domain, registering limits
// in c.
func (d *Document) compile(p *problems, c *Config) *Domain {
	if d.Domain == "" {
		p.add(d.File, d.line, "domain", "empty")
	} else if err := CheckKey(d.Domain); err != nil {
		p.add(d.File, d.line, "domain", "%v", err)
	}
	dom := &Domain{Name: d.Domain}
	d.compileLevel(p, c, &dom.root, d.Descriptors, "descriptors", d.Domain)
	return dom
}

func (d *Document) compileLevel(p *problems, c *Config, parent *node, descs []Descriptor, path, fullKey string) {
	for i := range descs {
		desc := &descs[i]
		field := fmt.Sprintf("%s[%d]", path, i)
		n := &node{}
		key := desc.Key
		if desc.Value != "" {
			key += "_" + desc.Value
		}
		full := fullKey + "." + key
		if desc.Key == "" {
			p.add(d.File, desc.line, field+".key", "empty")
		} else if err := CheckKey(desc.Key); err != nil {
			p.add(d.File, desc.line, field+".key", "%v", err)
		}
		if err := CheckValue(desc.Value); err != nil {
			p.add(d.File, desc.line, field+".value", "%v", err)
		}
		if !parent.insert(desc.Key, desc.Value, n) {
			p.add(d.File, desc.line, field, "duplicate descriptor %q", full)
		}
		n.limit = d.compileLimit(p, desc, field, full)
		d.compileHot(p, desc, n.limit, field)
		if n.limit != nil && c != nil {
			n.limit.Index = len(c.limits)
			c.limits = append(c.limits, n.limit)
		}
		d.compileLevel(p, c, n, desc.Descriptors, field+".descriptors", full)
	}
}

// insert adds child under key/value, reporting false for a duplicate.
func (n *node) insert(key, value string, child *node) bool {
	if n.keys == nil {
		n.keys = make(map[string]*keyNode)
	}
	k := n.keys[key]
	if k == nil {
		k = &keyNode{values: make(map[string]*node)}
		n.keys[key] = k
	}
	switch {
	case value == "":
		if k.any != nil {
			return false
		}
		k.any = child
	case strings.HasSuffix(value, "*"):
		prefix := strings.TrimSuffix(value, "*")
		for _, w := range k.wildcards {
			if w.prefix == prefix {
				return false
			}
		}
		k.wildcards = append(k.wildcards, wildcard{prefix: prefix, n: child})
	default:
		if k.values[value] != nil {
			return false
		}
		k.values[value] = child
	}
	return true
}

func (d *Document) compileLimit(p *problems, desc *Descriptor, field, full string) *Limit {
	limits := desc.RateLimits
	lfield := field + ".rate_limits"
	if desc.RateLimit != nil {
		if len(desc.RateLimits) > 0 {
			p.add(d.File, desc.line, field, "rate_limit and rate_limits are exclusive: use rate_limits for several limits")
		}
		limits = []RateLimit{*desc.RateLimit}
		lfield = field + ".rate_limit"
	}
	if len(limits) == 0 {
		if desc.ShadowMode {
			p.add(d.File, desc.line, field+".shadow_mode", "set on a descriptor without a rate_limit")
		}
		return nil
	}
	l := &Limit{Domain: d.Domain, FullKey: full, Name: full, ShadowMode: desc.ShadowMode,
		DetailedMetric: desc.DetailedMetric || desc.ValueToMetric, File: d.File, Line: desc.line}
	named := false
	for i := range limits {
		rl := &limits[i]
		f := lfield
		if desc.RateLimit == nil {
			f = fmt.Sprintf("%s[%d]", lfield, i)
		}
		if rl.Name != "" && !named {
			l.Name, named = rl.Name, true
		}
		for j, r := range rl.Replaces {
			switch {
			case r.Name == "":
				p.add(d.File, rl.line, fmt.Sprintf("%s.replaces[%d].name", f, j), "empty")
			case r.Name == rl.Name:
				p.add(d.File, rl.line, fmt.Sprintf("%s.replaces[%d].name", f, j), "a limit cannot replace itself (%q)", r.Name)
			default:
				l.Replaces = append(l.Replaces, r.Name)
			}
		}
		if rl.Unlimited {
			if len(limits) > 1 {
				p.add(d.File, rl.line, f+".unlimited", "cannot be combined with other limits on one descriptor")
			}
			if rl.Unit != "" || rl.Period != "" || rl.RequestsPerUnit != 0 || rl.Algorithm != "" || rl.Burst != 0 || rl.Scope != "" {
				p.add(d.File, rl.line, f+".unlimited", "should not specify unit, period, requests_per_unit, algorithm, burst or scope when unlimited")
			}
			l.Unlimited = true
			continue
		}
		local, scopeOK := d.compileScope(p, rl, f)
		rule, unit, mult, ok := d.compileRule(p, rl, f)
		if !ok || !scopeOK {
			continue
		}
		l.addScope(local)
		l.addShares(d.compileShares(p, rl, f))
		if len(l.Rules) == 0 {
			l.Unit, l.UnitMultiplier = unit, mult
			l.RequestsPerUnit = uint32(min(rule.Limit, math.MaxUint32))
		}
		l.Rules = append(l.Rules, rule)
	}
	return l
}

func (d *Document) compileRule(p *problems, rl *RateLimit, f string) (sluice.Rule, Unit, uint32, bool) {
	ok := true
	var period time.Duration
	unit, mult := UnitUnknown, uint32(0)
	switch {
	case rl.Unit != "" && rl.Period != "":
		p.add(d.File, rl.line, f+".period", "unit and period are exclusive")
		ok = false
	case rl.Unit != "":
		u, err := ParseUnit(rl.Unit)
		if err != nil {
			p.add(d.File, rl.line, f+".unit", "%v", err)
			ok = false
		}
		unit, mult, period = u, 1, u.Duration()
	case rl.Period != "":
		pd, err := time.ParseDuration(rl.Period)
		if err != nil {
			p.add(d.File, rl.line, f+".period", "not a duration like 30s, 5m or 1h30m: %q", rl.Period)
			ok = false
		}
		period = pd
		unit, mult = UnitOf(pd)
	default:
		p.add(d.File, rl.line, f+".unit", "missing: set unit (second, minute, ...) or period (e.g. 30s), or unlimited: true")
		ok = false
	}
	if rl.RequestsPerUnit <= 0 {
		p.add(d.File, rl.line, f+".requests_per_unit", "must be positive, got %d", rl.RequestsPerUnit)
		ok = false
	}
	algo := sluice.AlgorithmSlidingWindow
	if rl.Algorithm != "" {
		a, err := sluice.ParseAlgorithm(rl.Algorithm)
		if err != nil {
			p.add(d.File, rl.line, f+".algorithm", "unknown %q (want one of %s)", rl.Algorithm, algorithmNames())
			ok = false
		}
		algo = a
	}
	if !ok {
		return sluice.Rule{}, 0, 0, false
	}
	rule := sluice.Rule{Algorithm: algo, Limit: rl.RequestsPerUnit, Period: period, Burst: rl.Burst, SubWindows: rl.SubWindows}
	if err := rule.Validate(); err != nil {
		p.addRuleError(d.File, rl.line, f, err)
		return sluice.Rule{}, 0, 0, false
	}
	return rule, unit, mult, true
}

func algorithmNames() string {
	var names []string
	for _, a := range sluice.Algorithms() {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}

// CheckKey rejects domains and descriptor keys that cannot be part of a store key: control
// characters, and the braces that Redis Cluster reads as hash tags.
func CheckKey(s string) error {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("control character %q at byte %d", c, i)
		case c == '{' || c == '}':
			return fmt.Errorf("brace %q at byte %d (reserved for store hash tags)", c, i)
		}
	}
	return nil
}

// CheckValue rejects control characters in descriptor values. Braces are allowed in values
// (stores escape hash tags).
func CheckValue(s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("control character %q at byte %d", c, i)
		}
	}
	return nil
}
