package config

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/budget"
)

// ProxyBudget (Sluice) is a budget of a proxy section: a cost known only after the response,
// such as the tokens of an LLM API or their price, reserved when the request comes (its
// estimate, read from its JSON body), metered as the response flows and committed at what it
// cost (sluice.Limiter.ReserveAll, budget.Meter). A request all of whose budgets admit it is
// forwarded; a streamed response that would overspend is cut within one event.
//
//	proxy:
//	  rate_limits: [...]
//	  budgets:
//	    - name: tokens
//	      actions: [{request_headers: {header_name: X-Tenant, descriptor_key: tenant}}]
//	      rate_limit: {unit: minute, requests_per_unit: 100000, algorithm: fixed_window}
//	      mode: bounded
//	      usage: openai
//	    - name: dollars
//	      actions: [{request_headers: {header_name: X-Tenant, descriptor_key: tenant}}]
//	      rate_limit: {period: 720h, requests_per_unit: 50000000}   # $50 in micro-dollars
//	      prices: prices.yaml
type ProxyBudget struct {
	// Name names the budget in keys, the RateLimit headers and denials. Required, unique in
	// the domain.
	Name string `yaml:"name"`
	// Actions key the budget, as a rate limit's actions build a descriptor: one budget per
	// distinct set of values (a tenant's header). A request for which an action has no value
	// is not counted by the budget. Empty: one budget for every request.
	Actions []Action `yaml:"actions"`
	// RateLimit is the budget: its units (tokens, or micro-units of money with Prices) per
	// unit or period, under any algorithm.
	RateLimit RateLimit `yaml:"rate_limit"`
	// Mode is "bounded" (the default: admitted while the budget is not spent, overshoot at
	// most one request's reservation) or "strict" (admitted only when the estimate fits).
	Mode string `yaml:"mode"`
	// TTL is how long a reservation lives without a commit or an extension (a duration, at
	// most the period; default the period).
	TTL string `yaml:"ttl"`
	// OnExpiry is what a reservation never committed costs: "charge" (default, what it held)
	// or "free".
	OnExpiry string `yaml:"on_expiry"`
	// Usage is the API whose requests and responses are read: "openai" (default; Chat
	// Completions and Responses) or "anthropic" (Messages).
	Usage string `yaml:"usage"`
	// Prices is a price table (budget.LoadPrices), a path relative to the rules file: the
	// budget then counts micro-units of its currency. Empty: it counts tokens.
	Prices string `yaml:"prices"`
	// Estimate tunes the estimate of a request (budget.Estimator).
	Estimate EstimateOptions `yaml:"estimate"`
	// MaxBody bounds the request body read for the estimate (default 1 MiB; larger: 413).
	MaxBody int64 `yaml:"max_body"`
	line    int
}

// EstimateOptions are budget.Estimator's settings.
type EstimateOptions struct {
	BytesPerToken float64 `yaml:"bytes_per_token"`
	DefaultOutput int64   `yaml:"default_output"`
	MaxOutput     int64   `yaml:"max_output"`
}

// Budget is a compiled ProxyBudget.
type Budget struct {
	Name    string
	Actions []Action
	// Budget is the budget with its Rule, mode, TTL and expiry.
	Budget    sluice.Budget
	Extractor budget.Extractor
	// Prices prices usage in the budget's units; nil counts tokens.
	Prices    *budget.Prices
	Estimator budget.Estimator
	MaxBody   int64
}

// Charge is the budget's budget.Charge: tokens, or their price.
func (b *Budget) Charge() budget.Charge {
	if b.Prices != nil {
		return b.Prices.Cost
	}
	return budget.Tokens
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (b *ProxyBudget) UnmarshalYAML(n *yaml.Node) error {
	type plain ProxyBudget
	b.line = n.Line
	return decodeFields(n, (*plain)(b))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (e *EstimateOptions) UnmarshalYAML(n *yaml.Node) error {
	type plain EstimateOptions
	return decodeFields(n, (*plain)(e))
}

// compileBudgets checks the proxy section's budgets and returns them compiled.
func (d *Document) compileBudgets(p *problems, o Options) []*Budget {
	var out []*Budget
	seen := map[string]bool{}
	for i := range d.Proxy.Budgets {
		pb := &d.Proxy.Budgets[i]
		field := fmt.Sprintf("proxy.budgets[%d]", i)
		b := &Budget{Name: pb.Name, MaxBody: pb.MaxBody, Extractor: budget.OpenAI}
		ok := true
		bad := func(f, format string, args ...any) {
			p.add(d.File, pb.line, field+"."+f, format, args...)
			ok = false
		}
		switch {
		case pb.Name == "":
			bad("name", "empty")
		case seen[pb.Name]:
			bad("name", "%q names another budget of the domain", pb.Name)
		default:
			if err := CheckKey(pb.Name); err != nil {
				bad("name", "%v", err)
			}
		}
		seen[pb.Name] = true
		for j := range pb.Actions {
			a := pb.Actions[j]
			d.checkAction(p, &a, fmt.Sprintf("%s.actions[%d]", field, j))
			b.Actions = append(b.Actions, a)
		}
		rl := pb.RateLimit
		if rl.line == 0 {
			rl.line = pb.line
		}
		rule, _, _, rok := d.compileRule(p, o, &rl, field+".rate_limit")
		switch {
		case !rok:
			ok = false
		case rule.Limit == 0:
			bad("rate_limit.requests_per_unit", "a budget needs a positive limit")
		}
		b.Budget.Rule = rule
		mode, err := sluice.ParseBudgetMode(pb.Mode)
		if err != nil {
			bad("mode", "want bounded or strict, got %q", pb.Mode)
		}
		b.Budget.Mode = mode
		if pb.TTL != "" {
			ttl, err := time.ParseDuration(pb.TTL)
			switch {
			case err != nil:
				bad("ttl", "not a duration like 30s or 5m: %q", pb.TTL)
			case ttl < sluice.MinReservationTTL || rok && ttl > rule.Period:
				bad("ttl", "must be between %v and the period %v, got %v", sluice.MinReservationTTL, rule.Period, ttl)
			}
			b.Budget.TTL = ttl
		}
		switch pb.OnExpiry {
		case "", "charge":
		case "free":
			b.Budget.FreeOnExpiry = true
		default:
			bad("on_expiry", "want charge or free, got %q", pb.OnExpiry)
		}
		switch pb.Usage {
		case "", "openai":
		case "anthropic":
			b.Extractor = budget.Anthropic
		default:
			bad("usage", "want openai or anthropic, got %q", pb.Usage)
		}
		if pb.Prices != "" {
			path := pb.Prices
			if !filepath.IsAbs(path) && d.File != "" {
				path = filepath.Join(filepath.Dir(d.File), path)
			}
			data, err := os.ReadFile(path)
			if err == nil {
				b.Prices, err = budget.LoadPrices(data)
			}
			if err != nil {
				bad("prices", "%v", err)
			}
		}
		e := pb.Estimate
		if e.BytesPerToken < 0 || e.DefaultOutput < 0 || e.MaxOutput < 0 {
			bad("estimate", "bytes_per_token, default_output and max_output must not be negative")
		}
		b.Estimator = budget.Estimator{BytesPerToken: e.BytesPerToken, DefaultOutput: e.DefaultOutput, MaxOutput: e.MaxOutput}
		if pb.MaxBody < 0 {
			bad("max_body", "must not be negative, got %d", pb.MaxBody)
		}
		if ok {
			out = append(out, b)
		}
	}
	return out
}
