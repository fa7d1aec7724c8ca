package simulate_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/simulate"
)

// TestLLMBudgetBounds: at every concurrency, strict never charges past the budget, bounded
// by less than one request's maximum, metered or not; charge-after (Envoy AI Gateway's flow)
// goes past it by many requests once requests run concurrently. Needless denials are denials.
func TestLLMBudgetBounds(t *testing.T) {
	rows, err := simulate.RunLLMBudget(context.Background(), simulate.LLMBudgetPolicies, simulate.LLMBudgetConcurrency, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(simulate.LLMBudgetPolicies)*len(simulate.LLMBudgetConcurrency) {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		switch {
		case r.Needless > r.Denied || r.Admitted+r.Denied != r.Offered:
			t.Errorf("%+v: inconsistent counts", r)
		case (r.Policy == "strict" || r.Policy == "strict_metered") && r.Over != 0:
			t.Errorf("%s at %d: %d tokens over the budget", r.Policy, r.Concurrency, r.Over)
		case (r.Policy == "bounded" || r.Policy == "bounded_metered") && r.Over >= r.MaxCost:
			t.Errorf("%s at %d: %d tokens over, one request's maximum is %d", r.Policy, r.Concurrency, r.Over, r.MaxCost)
		case r.Policy == "charge_after" && r.Concurrency >= 100 && r.Over < 10*r.MaxCost:
			t.Errorf("charge_after at %d: only %d over", r.Concurrency, r.Over)
		case r.Charged < r.Budget/2:
			if r.Policy != "bounded" && r.Policy != "strict" {
				t.Errorf("%s at %d: %d charged of %d", r.Policy, r.Concurrency, r.Charged, r.Budget)
			}
		}
	}
}
