package config

import (
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
)

// CriticalityShares (YAML `criticality` in a rate limit) enables criticality classes on the
// limit: each class may use only its share of the capacity, so the lowest are shed first. A
// share left out is sluice.DefaultShares' (critical_plus 1, critical 0.9, sheddable_plus
// 0.75, sheddable 0.5); `criticality: {}` takes them all.
type CriticalityShares struct {
	CriticalPlus  *float64 `yaml:"critical_plus"`
	Critical      *float64 `yaml:"critical"`
	SheddablePlus *float64 `yaml:"sheddable_plus"`
	Sheddable     *float64 `yaml:"sheddable"`
	line          int
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (c *CriticalityShares) UnmarshalYAML(n *yaml.Node) error {
	type plain CriticalityShares
	c.line = n.Line
	return decodeFields(n, (*plain)(c))
}

// Shares returns the shares, the defaults in place of those left out.
func (c *CriticalityShares) Shares() sluice.Shares {
	s := sluice.DefaultShares
	for class, v := range map[sluice.Criticality]*float64{sluice.CriticalPlus: c.CriticalPlus, sluice.Critical: c.Critical,
		sluice.SheddablePlus: c.SheddablePlus, sluice.Sheddable: c.Sheddable} {
		if v != nil {
			s[class] = *v
		}
	}
	return s
}

// compileShares checks the rate limit's criticality shares; nil without.
func (d *Document) compileShares(p *problems, rl *RateLimit, f string) *sluice.Shares {
	if rl.Criticality == nil {
		return nil
	}
	s := rl.Criticality.Shares()
	if err := s.Validate(); err != nil {
		p.addRuleError(d.File, rl.Criticality.line, f+".criticality", err)
		return nil
	}
	return &s
}

// addShares records the criticality shares of the rule about to be appended to l.Rules.
func (l *Limit) addShares(s *sluice.Shares) {
	if s != nil && l.Shares == nil {
		l.Shares = make([]*sluice.Shares, len(l.Rules))
	}
	if l.Shares != nil {
		l.Shares = append(l.Shares, s)
	}
}

// SharesOf returns the criticality shares of the i-th rule, or nil when it has none.
func (l *Limit) SharesOf(i int) *sluice.Shares {
	if i < len(l.Shares) {
		return l.Shares[i]
	}
	return nil
}
