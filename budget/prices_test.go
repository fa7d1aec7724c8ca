package budget_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/budget"
)

func prices(t testing.TB) *budget.Prices {
	t.Helper()
	p, err := budget.LoadPrices(fixture(t, "prices/good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPricesCost: usage priced in integer micro-units, cached input apart, rounded up; a dated
// snapshot priced as its model; an unknown model an error that does not repeat its name.
func TestPricesCost(t *testing.T) {
	p := prices(t)
	for _, c := range []struct {
		u    budget.Usage
		want int64
	}{
		// 1,000 input at $2.50/M = 2,500 µ$; 200 output at $10/M = 2,000 µ$
		{budget.Usage{Model: "gpt-4o", InputTokens: 1000, OutputTokens: 200}, 4500},
		// 400 of the 1,000 cached at $1.25/M: 600 x 2.5 + 400 x 1.25 + 2,000 = 4,000
		{budget.Usage{Model: "gpt-4o", InputTokens: 1000, CachedInputTokens: 400, OutputTokens: 200}, 4000},
		{budget.Usage{Model: "gpt-4o-2024-05-13", InputTokens: 1, OutputTokens: 0}, 3},                // 2.5 rounded up
		{budget.Usage{Model: "claude-3-7-sonnet-20250219", InputTokens: 402, OutputTokens: 89}, 2541}, // 1,206 + 1,335
		{budget.Usage{Model: "free-model", InputTokens: 1 << 40, OutputTokens: 1 << 40}, 0},
		{budget.Usage{Model: "gpt-4o", InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64}, math.MaxInt64},
	} {
		if got, err := p.Cost(c.u); err != nil || got != c.want {
			t.Errorf("%+v: %d %v, want %d", c.u, got, err, c.want)
		}
	}
	_, err := p.Cost(budget.Usage{Model: "gpt-secret-7", InputTokens: 1})
	if !errors.Is(err, budget.ErrUnknownModel) || strings.Contains(err.Error(), "secret") {
		t.Errorf("unknown model: %v", err)
	}
	if got := p.Models(); len(got) != 3 || got[0] != "claude-3-7-sonnet" {
		t.Errorf("Models: %v", got)
	}
}

// TestLoadPricesRefuses: each bad table is refused with an error naming the field.
func TestLoadPricesRefuses(t *testing.T) {
	for file, want := range map[string]string{
		"unknown_field.yaml":  "outptu",
		"missing_output.yaml": "models.gpt-4o.output: missing",
		"negative.yaml":       "models.gpt-4o.input: must be between 0",
		"decimals.yaml":       "models.gpt-4o.input: at most six decimals",
		"empty.yaml":          "models: none listed",
		"not_a_map.yaml":      "price table",
	} {
		_, err := budget.LoadPrices(fixture(t, "prices/"+file))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", file, err, want)
		}
	}
}
