package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// problems collects validation errors, each naming file, line and field.
type problems struct{ errs []error }

func (p *problems) add(file string, line int, field, format string, args ...any) {
	p.errs = append(p.errs, &Problem{File: file, Line: line, Path: field, Reason: fmt.Sprintf(format, args...)})
}

// addRuleError reports a rule that sluice refuses under the rate limit's own field name: the
// rule's limit is the rate limit's requests_per_unit.
func (p *problems) addRuleError(file string, line int, rateLimit string, err error) {
	p.addFieldError(file, line, rateLimit, err, "limit", "requests_per_unit")
}

// addFieldError reports err under path: a *sluice.FieldError as path.<its field>, the field
// named from renamed to (the library's name of what the YAML names otherwise).
func (p *problems) addFieldError(file string, line int, path string, err error, from, to string) {
	var fe *sluice.FieldError
	if !errors.As(err, &fe) {
		p.add(file, line, path, "%v", err)
		return
	}
	field := fe.Field
	if field == from {
		field = to
	}
	p.add(file, line, path+"."+field, "%s", fe.Reason)
}

func (p *problems) err() error { return errors.Join(p.errs...) }

// Options change how rules are read and compiled. The zero value is Sluice's default.
type Options struct {
	// DefaultAlgorithm is the algorithm of a rate limit that names none (default
	// sluice.AlgorithmSlidingWindow). sluice.AlgorithmFixedWindow gives envoyproxy/ratelimit's
	// clock-aligned windows.
	DefaultAlgorithm sluice.Algorithm
	// MergeDomains lets several files define one domain, their descriptors merged
	// (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG); otherwise a second file is an error.
	MergeDomains bool
	// Tree reads a directory as envoyproxy/ratelimit reads its runtime directory: every file
	// below it, recursively, whatever its name, instead of the *.yaml and *.yml files directly
	// inside it. DotFiles then includes the names starting with '.' (the peer's default,
	// RUNTIME_IGNOREDOTFILES=false); they are always skipped without Tree.
	Tree, DotFiles bool
	// RefuseInFlight refuses every max_in_flight, saying why: sluice serve sets it, as the RLS
	// protocol has no request-finished signal to free a slot with.
	RefuseInFlight bool
	// GlobalWindowsOnly refuses a limit of scope global counted otherwise than in windows
	// (fixed_window, sliding_window): the regions' async mode counts windows (package
	// distributed/regions); sluice serve and proxy set it with --regions-mode async.
	GlobalWindowsOnly bool
	// MaxLease is the longest lease a max_in_flight may ask for (0: DefaultMaxLease; at most
	// sluice.MaxLease): a holder killed without releasing locks its slot for its lease.
	MaxLease time.Duration
}

// Validate reports every problem of the document, joined; nil when it compiles.
func (d *Document) Validate() error {
	var p problems
	d.compile(&p, nil, nil, Options{})
	return p.err()
}

// Compile validates the documents and builds a Config with the default Options.
func Compile(docs ...*Document) (*Config, error) { return CompileWith(Options{}, docs...) }

// CompileWith validates the documents and builds a Config. Every problem of every document
// is reported, joined, each wrapping ErrInvalid; two documents may share a domain only with
// o.MergeDomains.
func CompileWith(o Options, docs ...*Document) (*Config, error) {
	var p problems
	c := &Config{domains: make(map[string]*Domain)}
	for _, d := range docs {
		c.files = append(c.files, d.File)
		prev := c.domains[d.Domain]
		if prev != nil && !o.MergeDomains {
			p.add(d.File, d.line, "domain", "duplicate domain %q (already defined in another file; MERGE_DOMAIN_CONFIG merges them)", d.Domain)
			continue
		}
		dom := d.compile(&p, c, prev, o)
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

// compile checks the document and, when c is not nil, builds its domain (into dom when
// merging, else a new one), registering limits in c.
func (d *Document) compile(p *problems, c *Config, dom *Domain, o Options) *Domain {
	if d.Domain == "" {
		p.add(d.File, d.line, "domain", "empty")
	} else if err := CheckKey(d.Domain); err != nil {
		p.add(d.File, d.line, "domain", "%v", err)
	}
	if dom == nil {
		dom = &Domain{Name: d.Domain}
	}
	if proxy := d.compileProxy(p); proxy != nil {
		if dom.Proxy != nil {
			p.add(d.File, d.Proxy.line, "proxy", "a second proxy section for domain %q (merged domains take one)", d.Domain)
		}
		dom.Proxy = proxy
		dom.Budgets = d.compileBudgets(p, o)
	}
	d.compileLevel(p, c, o, &dom.root, d.Descriptors, "descriptors", d.Domain, false, nil)
	dom.quota = append(dom.quota, d.compileQuota(p)...) // merged domains: every file's
	return dom
}

// Telemetry values of a descriptor (see Descriptor.Telemetry).
const (
	TelemetryHashed = "hashed"
	TelemetryRaw    = "raw"
)

// compileLevel compiles descs, the descriptors under parent; raw are the RawValues of the
// levels above.
func (d *Document) compileLevel(p *problems, c *Config, o Options, parent *node, descs []Descriptor, path, fullKey string, valueToMetric bool, raw []bool) {
	for i := range descs {
		desc := &descs[i]
		field := fmt.Sprintf("%s[%d]", path, i)
		n := &node{share: desc.ShareThreshold, valueToMetric: desc.ValueToMetric}
		if strings.Contains(desc.Value, "*") {
			n.pattern = desc.Value
		}
		if desc.ShareThreshold && n.pattern == "" {
			p.add(d.File, desc.line, field+".share_threshold", "needs a wildcard value (with '*'), got %q", desc.Value)
		}
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
		vtm := valueToMetric || desc.ValueToMetric
		levels := append(raw[:len(raw):len(raw)], d.rawTelemetry(p, desc, field, n))
		n.limit = d.compileInFlight(p, o, desc, d.compileLimit(p, o, desc, field, full), field, full)
		if n.limit != nil {
			n.limit.ValueToMetric = vtm
			n.limit.RawValues = levels
		}
		d.compileHot(p, desc, n.limit, field)
		if n.limit != nil && c != nil {
			n.limit.Index = len(c.limits)
			c.limits = append(c.limits, n.limit)
		}
		if c != nil {
			c.rateLimits += len(desc.RateLimits)
			if desc.RateLimit != nil {
				c.rateLimits++
			}
		}
		d.compileLevel(p, c, o, n, desc.Descriptors, field+".descriptors", full, vtm, levels)
	}
}

// rawTelemetry checks desc's telemetry field and reports whether the request's value at its
// level may be shown as sent (see Limit.RawValues).
func (d *Document) rawTelemetry(p *problems, desc *Descriptor, field string, n *node) bool {
	switch desc.Telemetry {
	case "", TelemetryHashed:
	case TelemetryRaw:
		return true
	default:
		p.add(d.File, desc.line, field+".telemetry", "want %s or %s, got %q", TelemetryHashed, TelemetryRaw, desc.Telemetry)
	}
	return (desc.Value != "" && n.pattern == "") || n.share
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
	case strings.Contains(value, "*"):
		for _, w := range k.patterns {
			if w.n.pattern == value {
				return false
			}
		}
		k.patterns = append(k.patterns, pattern{parts: strings.Split(value, "*"), n: child})
	default:
		if k.values[value] != nil {
			return false
		}
		k.values[value] = child
	}
	return true
}

func (d *Document) compileLimit(p *problems, o Options, desc *Descriptor, field, full string) *Limit {
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
		return nil // shadow_mode and quota_mode without a limit mean nothing, as in the peer
	}
	l := &Limit{Domain: d.Domain, FullKey: full, Name: full, ShadowMode: desc.ShadowMode,
		DetailedMetric: desc.DetailedMetric, QuotaMode: desc.QuotaMode, Metadata: desc.Metadata,
		File: d.File, Line: desc.line}
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
			if rl.Unit != "" || rl.Period != "" || rl.Algorithm != "" || rl.Burst != 0 || rl.Scope != "" {
				p.add(d.File, rl.line, f+".unlimited", "should not specify unit, period, algorithm, burst or scope when unlimited")
			}
			l.Unlimited = true
			continue
		}
		scope, scopeOK := d.compileScope(p, rl, f)
		rule, unit, mult, ok := d.compileRule(p, o, rl, f)
		if !ok || !scopeOK {
			continue
		}
		if scope == ScopeGlobal && o.GlobalWindowsOnly && !CountsWindows(rule) {
			p.add(d.File, rl.line, f+".scope", "global limits are counted in windows by the regions' async mode: want fixed_window or sliding_window, got %s (or --regions-mode escrow)", rule.Algorithm)
			continue
		}
		if rl.RequestsPerUnit == 0 { // a block: always over the limit
			l.Block = true
			if len(l.Rules) == 0 {
				l.Unit, l.UnitMultiplier, l.RequestsPerUnit = unit, mult, 0
			}
			continue
		}
		l.addScope(scope)
		l.addShares(d.compileShares(p, rl, f))
		if len(l.Rules) == 0 && !l.Block {
			l.Unit, l.UnitMultiplier = unit, mult
			l.RequestsPerUnit = uint32(min(rule.Limit, math.MaxUint32))
		}
		l.Rules = append(l.Rules, rule)
		l.RuleNames = append(l.RuleNames, ruleName(rl.Name, full, i))
	}
	return l
}

// ruleName is the name of the i-th rate_limit of the descriptor of full key full (see
// Limit.RuleNames).
func ruleName(name, full string, i int) string {
	switch {
	case name != "":
		return name
	case i == 0:
		return full
	}
	return full + "[" + strconv.Itoa(i) + "]"
}

func (d *Document) compileRule(p *problems, o Options, rl *RateLimit, f string) (sluice.Rule, Unit, uint32, bool) {
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
		if rl.UnitMultiplier > 1 {
			mult = rl.UnitMultiplier
			if time.Duration(mult) > sluice.MaxPeriod/max(period, 1) {
				p.add(d.File, rl.line, f+".unit_multiplier", "%d %s is longer than %v", mult, u, sluice.MaxPeriod)
				ok = false
			}
			period *= time.Duration(mult)
		}
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
	if rl.UnitMultiplier > 0 && rl.Unit == "" {
		p.add(d.File, rl.line, f+".unit_multiplier", "needs a unit")
		ok = false
	}
	if rl.RequestsPerUnit < 0 {
		p.add(d.File, rl.line, f+".requests_per_unit", "must not be negative, got %d (0 blocks every request)", rl.RequestsPerUnit)
		ok = false
	}
	algo := o.DefaultAlgorithm
	if !algo.Valid() {
		algo = sluice.AlgorithmSlidingWindow
	}
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
	if rule.Limit == 0 {
		return rule, unit, mult, true // a block: no rule to validate
	}
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
			return fmt.Errorf("brace %q at byte %d (braces mark store hash tags)", c, i)
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
