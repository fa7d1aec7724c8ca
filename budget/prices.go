package budget

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Prices is a price table: what each model's tokens cost, per million, in a currency's unit
// (dollars, say), turned into integer micro-units (micro-dollars), so that a budget of "$50
// per tenant per 30 days" is a rule of 50,000,000 over 30 days under any algorithm. Load it
// from YAML with LoadPrices:
//
//	# USD per million tokens
//	models:
//	  gpt-4o: {input: 2.50, cached_input: 1.25, output: 10.00}
//	  claude-sonnet-4-5: {input: 3, cached_input: 0.30, output: 15}
//
// A Prices is read-only once loaded and safe for concurrent use.
type Prices struct {
	models map[string]Price
}

// Price is one model's prices in micro-units per million tokens (a price of $2.50 is
// 2,500,000).
type Price struct {
	Input, CachedInput, Output int64
}

// ErrUnknownModel reports a model the price table does not list.
var ErrUnknownModel = errors.New("budget: model not in the price table")

// maxPrice bounds a price per million tokens (a million units): no model costs more.
const maxPrice = 1_000_000

type pricesYAML struct {
	Models map[string]struct {
		Input       *float64 `yaml:"input"`
		CachedInput *float64 `yaml:"cached_input"`
		Output      *float64 `yaml:"output"`
	} `yaml:"models"`
}

// LoadPrices reads a price table from YAML (see Prices): a "models" map from each model's
// name to its input, output and (optional, default the input's) cached_input prices per
// million tokens, each between 0 and 1,000,000 with at most six decimals. Unknown fields are
// refused; every problem is reported, naming its field (models.NAME.input), in one error.
func LoadPrices(data []byte) (*Prices, error) {
	var doc pricesYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("budget: price table: %w", err)
	}
	if len(doc.Models) == 0 {
		return nil, errors.New("budget: price table: models: none listed")
	}
	p := &Prices{models: make(map[string]Price, len(doc.Models))}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(doc.Models)) {
		m := doc.Models[name]
		field := "models." + name
		if strings.TrimSpace(name) == "" {
			errs = append(errs, fmt.Errorf("budget: price table: models: an empty model name"))
			continue
		}
		if m.CachedInput == nil {
			m.CachedInput = m.Input
		}
		var price Price
		for _, f := range []struct {
			name string
			v    *float64
			out  *int64
		}{{"input", m.Input, &price.Input}, {"cached_input", m.CachedInput, &price.CachedInput}, {"output", m.Output, &price.Output}} {
			switch {
			case f.v == nil:
				errs = append(errs, fmt.Errorf("budget: price table: %s.%s: missing", field, f.name))
			case *f.v < 0 || *f.v > maxPrice || math.IsNaN(*f.v):
				errs = append(errs, fmt.Errorf("budget: price table: %s.%s: must be between 0 and %d per million tokens, got %v", field, f.name, maxPrice, *f.v))
			default:
				micro := math.Round(*f.v * 1e6)
				if math.Abs(micro-*f.v*1e6) > 1e-3 {
					errs = append(errs, fmt.Errorf("budget: price table: %s.%s: at most six decimals, got %v", field, f.name, *f.v))
				}
				*f.out = int64(micro)
			}
		}
		p.models[name] = price
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// snapshot matches a dated snapshot's suffix of a model's name: "-2024-05-13", "-20250219".
var snapshot = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8})$`)

// Price returns model's prices: the table's entry of that name, else of its name without a
// dated snapshot's suffix (a response names "gpt-4o-2024-05-13" for a request of "gpt-4o";
// "claude-3-7-sonnet-20250219" is priced as "claude-3-7-sonnet"). A model it does not list is
// ErrUnknownModel; the error does not repeat the name, a value of the request.
func (p *Prices) Price(model string) (Price, error) {
	if pr, ok := p.models[model]; ok {
		return pr, nil
	}
	if pr, ok := p.models[snapshot.ReplaceAllString(model, "")]; ok {
		return pr, nil
	}
	return Price{}, fmt.Errorf("%w (%d models listed)", ErrUnknownModel, len(p.models))
}

// Cost returns what u costs in micro-units: its uncached input, cached input and output tokens
// at their prices, rounded up to a whole micro-unit (a cost is never under-charged), at most
// math.MaxInt64.
func (p *Prices) Cost(u Usage) (int64, error) {
	pr, err := p.Price(u.Model)
	if err != nil {
		return 0, err
	}
	cached := min(max(u.CachedInputTokens, 0), max(u.InputTokens, 0))
	sum := new(big.Int)
	for _, t := range [][2]int64{{max(u.InputTokens, 0) - cached, pr.Input}, {cached, pr.CachedInput}, {max(u.OutputTokens, 0), pr.Output}} {
		sum.Add(sum, new(big.Int).Mul(big.NewInt(t[0]), big.NewInt(t[1])))
	}
	q, r := sum.QuoRem(sum, big.NewInt(1_000_000), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return math.MaxInt64, nil
	}
	return q.Int64(), nil
}

// Models returns the names the table lists, sorted.
func (p *Prices) Models() []string { return slices.Sorted(maps.Keys(p.models)) }
