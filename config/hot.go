package config

import (
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/hotkey"
)

// HotParam (YAML `hot`) makes a value-less descriptor a hot parameter: each value keeps its
// own limit, but only the values that are hot in this instance get a store call; the others
// are admitted on a bounded sketch's guarantee (package hotkey). Per-value exceptions are
// sibling descriptors with a value, which match first.
type HotParam struct {
	// TopK is how many values are tracked (default hotkey.DefaultTopK).
	TopK int `yaml:"top_k"`
	// ColdLimit is how many requests of one value an instance admits per period without a
	// store call (default a tenth of the limit; negative: none). In a fleet of N instances
	// ColdLimit <= limit / N keeps every value within its limit.
	ColdLimit int64 `yaml:"cold_limit"`
	line      int
}

// Config is the hotkey.Config of the parameter.
func (h *HotParam) Config() hotkey.Config { return hotkey.Config{TopK: h.TopK, ColdLimit: h.ColdLimit} }

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (h *HotParam) UnmarshalYAML(n *yaml.Node) error {
	type plain HotParam
	h.line = n.Line
	return decodeFields(n, (*plain)(h))
}

// compileHot checks a descriptor's hot parameter and sets it on its limit.
func (d *Document) compileHot(p *problems, desc *Descriptor, l *Limit, field string) {
	h := desc.Hot
	if h == nil {
		return
	}
	f := field + ".hot"
	switch {
	case desc.Value != "":
		p.add(d.File, h.line, f, "set on a descriptor with a value: a hot parameter limits each value of a value-less key")
	case l == nil || l.Unlimited || desc.RateLimit == nil:
		p.add(d.File, h.line, f, "needs one rate_limit on the descriptor (not rate_limits, not unlimited)")
	case l.IsLocal(0):
		p.add(d.File, h.line, f, "set on a local limit: a hot parameter saves calls to the shared store")
	case desc.ShadowMode:
		p.add(d.File, h.line, f, "cannot be combined with shadow_mode")
	case len(l.Rules) == 1:
		if _, err := hotkey.New(l.Rules[0], h.Config()); err != nil {
			p.addRuleError(d.File, h.line, f, err)
			return
		}
		l.Hot = h
	}
}
